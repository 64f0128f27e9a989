import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Issue 38, item 7: one supported runtime, Node 22 LTS, named the same by everything that picks a Node.js:
 * the image, the offline Node image, CI's install and the README. (CI reports the version it ran on; the
 * image's `node --version` is checked by test/container.test.ts.)
 */
const read = (file: string) =>
  readFileSync(fileURLToPath(new URL(`../../../${file}`, import.meta.url)), 'utf8');

describe('the supported runtime', () => {
  it('is Node 22 in the Dockerfile, the offline image, CI and the README', () => {
    expect(read('Dockerfile')).toMatch(/^ARG NODE_IMAGE=node:22-bookworm-slim$/m);
    expect(read('scripts/node-image.sh')).toMatch(/^major="\$\{AGENTICFIX_NODE_MAJOR:-22\}"$/m);
    expect(read('scripts/node-dist.sh')).toMatch(/^major="\$\{1:-22\}"$/m);
    const ci = read('.ci/run');
    expect(ci).toContain(`process.versions.node.split(".")[0]')" -lt 22 ]`);
    expect(ci).toContain('bash scripts/node-dist.sh 22');
    expect(ci).toMatch(/echo "node \$\(node --version\)/);
    const readme = read('README.md');
    expect(readme).toContain('Node.js 22 (LTS) is the supported runtime');
    expect(read('docs/operating.md')).toContain('--build-arg NODE_IMAGE=agenticfix/node:22');
  });

  it('still lets the Quick start run on Node 20', () => {
    const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
    expect(engines).toBe('>=20.18.1');
  });
});
