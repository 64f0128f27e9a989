import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ENV_SCHEMA, unknownSettings } from '../../../src/config/env.js';
import {
  parseRepoConfig,
  REPO_CONFIG_SCHEMA_URL,
  repoConfigJsonSchema,
} from '../../../src/config/repo-config.js';
import { envExample, settings, withSettingsTable } from '../../../src/config/settings-doc.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const read = (name: string) => readFileSync(`${ROOT}${name}`, 'utf8');

describe('the settings table', () => {
  it('docs/configuration.md and .env.example are what the schema generates (node scripts/settings-doc.mjs)', () => {
    expect(read('docs/configuration.md')).toBe(withSettingsTable(read('docs/configuration.md')));
    expect(read('.env.example')).toBe(envExample());
    for (const name of Object.keys(ENV_SCHEMA.shape)) {
      expect(read('docs/configuration.md')).toContain(`| \`${name}\` |`);
      expect(read('.env.example')).toContain(`# ${name}=`);
    }
  });

  it('a stale table is told apart: a setting missing from it changes the generated doc', () => {
    const doc = read('docs/configuration.md');
    const stale = doc.replace(/^\| `AGENTICFIX_CHECK_TIMEOUT_S` \|.*\n/m, '');
    expect(stale).not.toBe(doc);
    expect(withSettingsTable(stale)).toBe(doc);
  });

  // Issue 39, item 5: each setting was written three times (schema, mapping, a DOCS table beside it).
  it("takes each setting's line from its .describe() on the schema, and refuses a setting without one", () => {
    expect(settings().find((s) => s.name === 'AGENTICFIX_LABEL')).toEqual({
      name: 'AGENTICFIX_LABEL',
      default: 'agenticfix',
      doc: ENV_SCHEMA.shape.AGENTICFIX_LABEL.description,
    });
    for (const s of settings()) expect([s.name, s.doc.length > 10]).toEqual([s.name, true]);
    const undescribed = z.object({ ...ENV_SCHEMA.shape, AGENTICFIX_NEW: z.string().optional() });
    expect(() => settings(undescribed)).toThrow('AGENTICFIX_NEW has no .describe(...) in ENV_SCHEMA');
  });

  it('the README keeps no settings table of its own: it links to the generated one', () => {
    const readme = read('README.md');
    expect(readme).not.toMatch(/^\| `AGENTICFIX_/m);
    expect(readme).toContain('(docs/configuration.md)');
    expect(readme.split('\n').length).toBeLessThan(200);
  });

  it('unknown AGENTICFIX_ variables are named with the nearest setting; script variables are not', () => {
    expect(
      unknownSettings({
        AGENTICFIX_TOKEN_BUDJET: '1',
        AGENTICFIX_FROBNICATE: '1',
        AGENTICFIX_TEST_REDIS_URL: 'redis://x',
        AGENTICFIX_LABEL: 'x',
        PATH: '/bin',
      }),
    ).toEqual([
      'AGENTICFIX_FROBNICATE is not a setting and is ignored',
      'AGENTICFIX_TOKEN_BUDJET is not a setting and is ignored (did you mean AGENTICFIX_TOKEN_BUDGET?)',
    ]);
  });

  it('schema/agenticfix.schema.json is the repository config schema, strict like the parser', () => {
    const schema = repoConfigJsonSchema() as {
      properties: Record<string, { description?: string }>;
      additionalProperties: boolean;
    };
    expect(JSON.parse(read('schema/agenticfix.schema.json'))).toEqual(schema);
    expect(schema.additionalProperties).toBe(false);
    // Every key the parser takes is in the schema, with its description; the parser refuses what it lacks.
    const limits = {
      ceilings: {
        tokens: 1,
        requests: 1,
        toolCalls: 1,
        timeMs: 1,
        revisions: 5,
        attempts: 3,
        ciRounds: 2,
        costUsd: null,
      },
      model: { allowlist: [] },
    };
    for (const [key, prop] of Object.entries(schema.properties))
      expect([key, prop.description]).toEqual([key, expect.any(String)]);
    expect(parseRepoConfig('publish_unverified: true\n', limits)).toMatchObject({ ok: true });
    expect(parseRepoConfig('frobnicate: true\n', limits)).toMatchObject({ ok: false });
    expect(Object.keys(schema.properties)).toContain('ci_feedback');
  });

  // Issue 38, item 5: editors had no stable URL to fetch the schema from.
  it("has a stable $id, the file on the project's default branch, and the docs give the editor line", () => {
    const project = /^url: https:\/\/github\.com\/(\S+)$/m.exec(read('app.yml'))![1];
    const url = `https://raw.githubusercontent.com/${project}/main/schema/agenticfix.schema.json`;
    expect(repoConfigJsonSchema().$id).toBe(url);
    expect(REPO_CONFIG_SCHEMA_URL).toBe(url);
    expect(read('docs/configuration.md')).toContain(`# yaml-language-server: $schema=${url}`);
  });
});
