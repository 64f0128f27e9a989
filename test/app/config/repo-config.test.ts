import { rmSync } from 'node:fs';
import type { Config } from '../../../src/config/config.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import {
  DEFAULT_CI_ENTRY_POINTS,
  DEFAULT_TEST_ARGV,
  parseRepoConfig,
  REPO_CONFIG_MAX_BYTES,
} from '../../../src/config/repo-config.js';
import { matchingPattern, parsePathPattern } from '../../../src/config/path-patterns.js';
import { fetchFile } from '../../../src/config/repo-file.js';
import { installationClient, startEmulator, tempDir, testConfig } from '../../support/app.js';

const home = tempDir('repo-config-');
afterAll(() => rmSync(home, { recursive: true, force: true }));
/** The operator's defaults: ceilings equal to the budgets, the configured model only. */
const apiCalls = (emu: GitHubEmulator, from: number) =>
  emu.requests
    .slice(from)
    .map((q) => q.path)
    .filter((p) => p.startsWith('/repos/'));
const operator = testConfig(home, { AGENTICFIX_MODEL_NAME: 'deepseek-chat' });

describe('repository config', () => {
  const DEFAULTS = {
    test: DEFAULT_TEST_ARGV,
    budgets: {},
    protected_paths: [],
    ci_entry_points: { paths: DEFAULT_CI_ENTRY_POINTS, policy: 'flag' },
    publish_unverified: false,
    verify: { rebuild: 'changed' },
    revise_on: ['command'],
    max_revisions: 5,
    max_cost_usd: null, // the operator set no cost limit
    attempts: 1,
    attempts_policy: 'smallest_verified',
    ci_feedback: { enabled: false, max_rounds: 2 },
  };

  it('gives the defaults when there is no file or an empty one', () => {
    for (const text of [null, '', '# nothing\n']) {
      expect(parseRepoConfig(text, operator)).toEqual({ ok: true, config: DEFAULTS });
    }
  });

  it('reads every setting', () => {
    const r = parseRepoConfig(
      [
        'label: fix-me',
        'test: [npm, test, "--", --silent]',
        'dockerfile: ci/agent.Dockerfile',
        'model: deepseek-chat',
        'budgets: { tokens: 90000, requests: 20, tool_calls: 40, time_s: 600 }',
        'protected_paths: [migrations/, LICENSE]',
        'ci_entry_points: { paths: ["**/conftest.py", ./Makefile], policy: block }',
        'publish_unverified: true',
        'verify: { rebuild: always }',
        'revise_on: [command, changes_requested, command]',
        'max_revisions: 2',
        'max_cost_usd: 0.75',
        'attempts: 2',
        'attempts_policy: first_verified',
        'ci_feedback: { enabled: true, max_rounds: 1, apps: [github-actions, circleci-checks] }',
      ].join('\n'),
      operator,
    );
    expect(r).toEqual({
      ok: true,
      config: {
        label: 'fix-me',
        test: ['npm', 'test', '--', '--silent'],
        dockerfile: 'ci/agent.Dockerfile',
        model: 'deepseek-chat',
        budgets: { tokens: 90000, requests: 20, tool_calls: 40, time_s: 600 },
        protected_paths: ['migrations', 'LICENSE'],
        ci_entry_points: { paths: ['**/conftest.py', 'Makefile'], policy: 'block' },
        publish_unverified: true,
        verify: { rebuild: 'always' },
        revise_on: ['command', 'changes_requested'],
        max_revisions: 2,
        max_cost_usd: 0.75,
        attempts: 2,
        attempts_policy: 'first_verified',
        ci_feedback: { enabled: true, max_rounds: 1, apps: ['github-actions', 'circleci-checks'] },
      },
    });
  });

  it('takes `ci_entry_points: block` (or flag) as the policy for the default list', () => {
    for (const policy of ['block', 'flag']) {
      const r = parseRepoConfig(`ci_entry_points: ${policy}`, operator);
      expect(r.ok && r.config.ci_entry_points).toEqual({ paths: DEFAULT_CI_ENTRY_POINTS, policy });
    }
    const r = parseRepoConfig('ci_entry_points: { policy: block }', operator);
    expect(r.ok && r.config.ci_entry_points).toEqual({ paths: DEFAULT_CI_ENTRY_POINTS, policy: 'block' });
    expect(parseRepoConfig('ci_entry_points: never', operator).ok).toBe(false);
  });

  it.each([
    ['test: "pytest -q"', 'test'],
    ['test: []', 'test'],
    ['budgets: { tokens: -5 }', 'budgets.tokens'],
    ['budgets: { cents: 5 }', 'budgets'],
    ['dockerfile: ../../etc/passwd', 'dockerfile'],
    ['protected_paths: [/abs]', 'protected_paths.0'],
    ['colour: blue', 'colour'],
    ['publish_unverified: maybe', 'publish_unverified'],
    ['verify: { rebuild: never }', 'verify.rebuild'],
    ['verify: { cache: false }', 'verify'],
    ['revise_on: [always]', 'revise_on.0'],
    ['max_revisions: -1', 'max_revisions'],
    ['ci_feedback: { enabled: true, rounds: 9 }', 'ci_feedback'],
    ['ci_feedback: { apps: [GitHub Actions] }', 'ci_feedback.apps.0'],
    ['guidance_file: ../../etc/passwd', 'guidance_file'],
    ['guidance_file: /etc/passwd', 'guidance_file'],
  ])('reports %s as an error naming the field', (text, field) => {
    const r = parseRepoConfig(text, operator);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toContain('.github/agenticfix.yml is invalid');
    expect(!r.ok && r.error).toContain(field);
  });

  // Issue 38, item 5: unknown keys got zod's "Unrecognized key" at their parent, with no hint.
  it('names an unknown key by its path, with the nearest key at that level when one is close', () => {
    const r = parseRepoConfig(
      'protectd_paths: [a]\ncolour: blue\nci_feedback: { enabeld: true }\n',
      operator,
    );
    expect(!r.ok && r.error.split('\n')).toEqual([
      '.github/agenticfix.yml is invalid:',
      '- `ci_feedback.enabeld`: unknown key (did you mean `ci_feedback.enabled`?)',
      '- `protectd_paths`: unknown key (did you mean `protected_paths`?)',
      '- `colour`: unknown key',
    ]);
    const nested = parseRepoConfig('ci_entry_points: { polcy: block }', operator);
    expect(!nested.ok && nested.error).toContain('(did you mean `ci_entry_points.policy`?)');
  });

  it('reports YAML syntax errors', () => {
    const r = parseRepoConfig('test: [unclosed', operator);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toContain('not valid YAML');
  });
});

// Issue 24, item 4: a 40 KB nest of `[` kept the event loop for 2 s (64 KB of keys: 0.5-1 s) in the parser.
describe('parsing is bounded', () => {
  const nest = (n: number) => `test: ${'['.repeat(n)}x${']'.repeat(n)}`;
  let keys = '';
  for (let i = 0; keys.length < 60_000; i++) keys += `k${i}: [a, b, c]\n`;
  const indented = Array.from({ length: 200 }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n');

  it.each([
    ['40 KB of nested `[`', nest(20_000), 'nests `[`/`{` deeper than 16 levels'],
    ['60 KB of keys', keys, 'has more than 5000 YAML tokens'],
    ['200 levels of indentation', indented, 'is indented deeper than 64 columns'],
    ['an alias', 'test: &t [a]\nbudgets: *t\n', 'Alias resolution is disabled'],
  ])('refuses %s quickly, saying why', (_name, text, why) => {
    const t0 = performance.now();
    const r = parseRepoConfig(text, operator);
    const ms = performance.now() - t0;
    expect(!r.ok && r.error).toContain(why);
    expect(ms).toBeLessThan(250); // was 2000 ms and more for the nest
  });

  it('still reads a config at the limits', () => {
    const paths = Array.from({ length: 500 }, (_, i) => `  - src/dir${i}/secret.py`).join('\n');
    const r = parseRepoConfig(`test: ${'['.repeat(15)}x${']'.repeat(15)}\n`, operator);
    expect(!r.ok && r.error).toContain('`test.0`'); // parsed: the schema speaks, not the limits
    expect(parseRepoConfig(`protected_paths:\n${paths}\n`, operator).ok).toBe(true);
  });
});

// Issue 10, item 3: these were accepted, and a writer of any repository spent the operator's key.
describe("the operator's ceilings", () => {
  const ATTACK = 'budgets: {tokens: 1e12, requests: 1e9, time_s: 1e8}\nmodel: gpt-4.5-preview\n';

  it('refuses budgets over the ceilings and models off the allowlist, naming each value', () => {
    const r = parseRepoConfig(ATTACK, operator);
    expect(r.ok).toBe(false);
    const error = !r.ok ? r.error : '';
    expect(error).toContain('asks for more than the operator allows');
    expect(error).toContain(
      "`budgets.tokens`: 1000000000000 exceeds the operator's ceiling of 150000 tokens",
    );
    expect(error).toContain(
      "`budgets.requests`: 1000000000 exceeds the operator's ceiling of 60 model requests",
    );
    expect(error).toContain("`budgets.time_s`: 100000000 exceeds the operator's ceiling of 1800 seconds");
    expect(error).toContain(
      "`model`: `gpt-4.5-preview` is not among the operator's allowed models: `deepseek-chat`",
    );
  });

  it('accepts lower budgets and the configured model', () => {
    const r = parseRepoConfig(
      'budgets: {tokens: 1000, requests: 5, tool_calls: 9, time_s: 60}\nmodel: deepseek-chat',
      operator,
    );
    expect(r.ok).toBe(true);
  });

  it('lets the operator raise the ceilings and allow other models', () => {
    const generous = testConfig(home, {
      AGENTICFIX_MAX_TOKENS: '2000000000000',
      AGENTICFIX_MAX_REQUESTS: '1000000000',
      AGENTICFIX_MAX_TIME_S: '100000000',
      AGENTICFIX_MODEL_ALLOWLIST: 'deepseek-chat, gpt-4.5-preview',
    });
    expect(generous.model.allowlist).toEqual(['deepseek-chat', 'gpt-4.5-preview']);
    expect(parseRepoConfig(ATTACK, generous).ok).toBe(true);
    // Without a configured model name or an allowlist, no repository may pick a model.
    const none = testConfig(home);
    const r = parseRepoConfig('model: deepseek-chat', none);
    expect(!r.ok && r.error).toContain("is not among the operator's allowed models (none)");
  });

  // Issue 24, item 4: `max_revisions: 100` gave a pull request 100 revisions, each with a full budget.
  it('refuses max_revisions and ci_feedback.max_rounds over the ceilings by name; their defaults are the ceilings', () => {
    const r = parseRepoConfig(
      'max_revisions: 100\nci_feedback: { enabled: true, max_rounds: 9 }\n',
      operator,
    );
    expect(!r.ok && r.error).toContain(
      "`max_revisions`: 100 exceeds the operator's ceiling of 5 revisions per pull request",
    );
    expect(!r.ok && r.error).toContain(
      "`ci_feedback.max_rounds`: 9 exceeds the operator's ceiling of 2 CI feedback rounds per pull request",
    );
    const strict = testConfig(home, {
      AGENTICFIX_MAX_REVISIONS: '1',
      AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS: '1',
    });
    const d = parseRepoConfig(null, strict);
    expect(d.ok && [d.config.max_revisions, d.config.ci_feedback.max_rounds]).toEqual([1, 1]);
    expect(parseRepoConfig('max_revisions: 2', strict).ok).toBe(false);
    expect(parseRepoConfig('max_revisions: 0', strict).ok).toBe(true); // lowering is always fine
  });

  it("refuses max_cost_usd over the operator's AGENTICFIX_MAX_COST_USD by name; its default is the operator's", () => {
    const capped = testConfig(home, { AGENTICFIX_MAX_COST_USD: '2' });
    const over = parseRepoConfig('max_cost_usd: 5', capped);
    expect(!over.ok && over.error).toBe(
      ".github/agenticfix.yml asks for more than the operator allows:\n- `max_cost_usd`: 5 exceeds the operator's ceiling of 2 USD",
    );
    const d = parseRepoConfig(null, capped);
    expect(d.ok && d.config.max_cost_usd).toBe(2);
    const lower = parseRepoConfig('max_cost_usd: 0.25', capped);
    expect(lower.ok && lower.config.max_cost_usd).toBe(0.25);
    expect(parseRepoConfig('max_cost_usd: 0', capped).ok).toBe(false); // no limit is not a lower one
  });

  it('refuses a ceiling below the default budget at start-up, naming both variables', () => {
    expect(() => testConfig(home, { AGENTICFIX_MAX_TOKENS: '1000' })).toThrow(
      /AGENTICFIX_MAX_TOKENS: 1000 is below AGENTICFIX_TOKEN_BUDGET \(150000\)/,
    );
  });
});

// Issue 10, item 7: `./migrations` and `migrations/**` were accepted and then matched as literal prefixes.
describe('path patterns', () => {
  it.each([
    ['./migrations', 'migrations'],
    ['migrations/', 'migrations'],
    ['migrations/**', 'migrations/**'],
    ['migrations/*.sql', 'migrations/*.sql'],
    ['**/secrets.txt', '**/secrets.txt'],
    ['.//a//b/', 'a/b'],
    ['a/**/**/b', 'a/**/b'],
    ['a/**//**/b', 'a/**/b'],
    ['.github/workflows', '.github/workflows'],
  ])('normalises %s to %s', (entry, pattern) => {
    expect(parsePathPattern(entry)).toEqual({ ok: true, pattern });
  });

  it.each([
    ['/etc/passwd', 'is absolute'],
    ['../outside', 'contains `..`'],
    ['a/../../b', 'contains `..`'],
    ['{a,b}/x', 'uses `{`'],
    ['[ab].txt', 'uses `[`'],
    ['!migrations', 'negation'],
    ['a\\b', 'contains `\\`'],
    ['mig**', '`**` must be a whole path segment'],
    ['a/./b', 'contains a `.` directory'],
    ['.', 'covers the whole repository'],
    ['**', 'covers the whole repository'],
    [' LICENSE', 'leading or trailing spaces'],
  ])('refuses %s (%s), naming the entry', (entry, why) => {
    const r = parsePathPattern(entry);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toContain(`\`${entry}\``);
    expect(!r.ok && r.error).toContain(why);
    const cfg = parseRepoConfig(`protected_paths: [LICENSE, ${JSON.stringify(entry)}]`, operator);
    expect(!cfg.ok && cfg.error).toContain(`\`protected_paths.1\`: \`${entry}\``);
  });

  it('the default CI entry points are valid, normalised patterns', () => {
    for (const p of DEFAULT_CI_ENTRY_POINTS) expect(parsePathPattern(p)).toEqual({ ok: true, pattern: p });
    const hits = [
      'tests/unit/conftest.py',
      'web/package.json',
      'Makefile',
      '.github/actions/setup/action.yml',
    ].map((f) => matchingPattern(f, DEFAULT_CI_ENTRY_POINTS));
    expect(hits).toEqual(['**/conftest.py', '**/package.json', '**/Makefile', '.github/actions']);
    expect(matchingPattern('src/calc.py', DEFAULT_CI_ENTRY_POINTS)).toBeUndefined();
  });

  it('matches files, directories and globs with one matcher', () => {
    const m = (file: string, pattern: string) => matchingPattern(file, [pattern]) !== undefined;
    expect(m('.github/workflows/ci.yml', '.github/workflows')).toBe(true);
    expect(m('.github/workflowsx/ci.yml', '.github/workflows')).toBe(false);
    expect(m('migrations/001.sql', './migrations')).toBe(true);
    expect(m('migrations/a/b.sql', 'migrations/**')).toBe(true);
    expect(m('migrations/001.sql', 'migrations/*.sql')).toBe(true);
    expect(m('migrations/a/b.txt', 'migrations/*.sql')).toBe(false);
    expect(m('secrets.txt', '**/secrets.txt')).toBe(true);
    expect(m('a/b/secrets.txt', '**/secrets.txt')).toBe(true);
    expect(m('a/b/my-secrets.txt', '**/secrets.txt')).toBe(false);
    expect(m('a/b', 'a/**/b')).toBe(true);
    expect(m('a/x/y/b/c', 'a/**/b')).toBe(true);
    expect(m('ab', 'a/**/b')).toBe(false);
    expect(m('a/b', 'a/**/**/b')).toBe(true);
    expect(m('pkg/requirements-dev.txt', 'requirements*.txt')).toBe(false);
    expect(m('requirements-dev.txt', 'requirements*.txt')).toBe(true);
    expect(m('src/v1.2/x', 'src/v1?2')).toBe(true);
    expect(m('src/v1.2/x', 'src/v1.2')).toBe(true);
    expect(m('src/v1x2/x', 'src/v1.2')).toBe(false); // `.` is literal
    expect(() => matchingPattern('x', ['{a,b}'])).toThrow(/invalid path pattern/);
  });
});

// Issue 10, item 9: a config over 1 MB came back with `encoding: "none"` and the delivery failed
// silently; an 8 MB one was decoded and parsed on the event loop.
describe('fetching repository files', () => {
  let emu: GitHubEmulator;
  let config: Config;
  const BIG = 'x: "' + 'a'.repeat(8 * 1024 * 1024) + '"\n';
  const DOCKERFILE = 'FROM agenticfix/debian:bookworm\n' + '# padding\n'.repeat(150_000); // 1.5 MB

  beforeAll(async () => {
    emu = await startEmulator();
    config = testConfig(home);
    emu.createRepo('big', 'repo', { files: { '.github/agenticfix.yml': BIG, 'ci/Dockerfile': DOCKERFILE } });
  });
  afterAll(async () => emu?.close());

  it('the contents API leaves out files over 1 MB, as GitHub does', async () => {
    const gh = await installationClient(emu, config, 'big');
    const { data } = await gh.rest.repos.getContent({
      owner: 'big',
      repo: 'repo',
      path: '.github/agenticfix.yml',
    });
    expect(data).toMatchObject({ type: 'file', encoding: 'none', content: '', size: BIG.length });
  });

  it('refuses a file over the limit from its size, before reading or decoding it', async () => {
    const gh = await installationClient(emu, config, 'big');
    const before = emu.requests.length;
    const t0 = Date.now();
    const r = await fetchFile(gh, 'big', 'repo', '.github/agenticfix.yml', 'main', REPO_CONFIG_MAX_BYTES);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r).toEqual({
      ok: false,
      error: `\`.github/agenticfix.yml\` has ${BIG.length} bytes, over the 65536-byte limit; nothing was read.`,
    });
    expect(apiCalls(emu, before)).toEqual(['/repos/big/repo/contents/.github/agenticfix.yml']);
  });

  it('reads a file over 1 MB (within its limit) through the git blob API', async () => {
    const gh = await installationClient(emu, config, 'big');
    const before = emu.requests.length;
    const r = await fetchFile(gh, 'big', 'repo', 'ci/Dockerfile', 'main', 4 * 1024 * 1024);
    expect(r).toEqual({ ok: true, text: DOCKERFILE });
    expect(apiCalls(emu, before)).toEqual([
      '/repos/big/repo/contents/ci/Dockerfile',
      expect.stringMatching(/^\/repos\/big\/repo\/git\/blobs\/[0-9a-f]{40}$/),
    ]);
    expect(await fetchFile(gh, 'big', 'repo', 'missing', 'main', 10)).toEqual({ ok: true, text: null });
  });

  it('turns any other refusal (GitHub answers 403 over 100 MB) into an error to report', async () => {
    const gh = await installationClient(emu, config, 'big');
    emu.failNext({ path: /\/contents\/\.github\/agenticfix\.yml$/ }, [
      {
        status: 403,
        body: { message: 'This API returns blobs up to 100 MB in size.', errors: [{ code: 'too_large' }] },
      },
    ]);
    const r = await fetchFile(gh, 'big', 'repo', '.github/agenticfix.yml', 'main', REPO_CONFIG_MAX_BYTES);
    expect(r).toEqual({
      ok: false,
      error: expect.stringMatching(
        /^`\.github\/agenticfix\.yml` could not be read \(403: GitHub answered 403 to GET \S+: This API returns blobs up to 100 MB/,
      ),
    });
  });
});
