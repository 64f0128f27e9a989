import { readFileSync } from 'node:fs';
import { buildInfo } from '../../../src/config/version.js';

/** Issue 38, item 1: one version, package.json's, wherever a version is shown. */
describe('the version', () => {
  const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

  it("is package.json's in the code, the image's OCI label and the changelog", () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(buildInfo()).toEqual({ version, commit: expect.stringMatching(/^\w+$/), node: process.version });
    const dockerfile = readFileSync('Dockerfile', 'utf8');
    expect(/^ARG VERSION=(.*)$/m.exec(dockerfile)?.[1]).toBe(version);
    expect(dockerfile).toContain('org.opencontainers.image.version="${VERSION}"');
    const changelog = readFileSync('CHANGELOG.md', 'utf8');
    expect(changelog).toMatch(
      new RegExp(`^## \\[${version.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'),
    );
  });
});
