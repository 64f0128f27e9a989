import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { loadConfig } from '../../../src/config/config.js';
import { LocalSandbox } from '../../../src/environment/local.js';
import { readSameFile } from '../../../src/tools/files.js';
import { resolveInWorktree } from '../../../src/tools/paths.js';
import { z } from 'zod';
import { ContextManager } from '../../../src/agent/context.js';
import { FINISH_SCHEMA } from '../../../src/agent/calls.js';
import { createRegistry, DEFAULT_TOOLS, IsolationError, lastTestState } from '../../../src/tools/registry.js';
import { renderObservation } from '../../../src/tools/observation.js';
import {
  fail,
  ok,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from '../../../src/tools/types.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { makeBuildEnvironmentTool } from '../../../src/tools/build-environment.js';
import type { EnvironmentBuilder } from '../../../src/environment/types.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

// A file's version as the tools define it, computed independently: SHA-256 cut to 16 hex digits.
const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => Promise.all(cleanups.map((c) => c())));

/** A temp git repo as the worktree, a run dir beside it, and a registry over both. */
async function setup(
  files: Record<string, string | Buffer>,
  limits: Partial<ToolContext['limits']> = {},
  tools: ToolDefinition[] = DEFAULT_TOOLS,
) {
  const { dir, cleanup } = await tempDir('tools-');
  cleanups.push(cleanup);
  const repo = await makeSourceRepo(path.join(dir, 'repo'), files);
  const trace = new RunTrace('run-1', path.join(dir, 'runs'));
  const ctx: ToolContext = {
    runId: 'run-1',
    worktree: repo.path,
    gitDir: path.join(repo.path, '.git'),
    baseCommit: repo.head,
    limits: { ...loadConfig({}).limits, ...limits },
    testCommands: {
      default: [process.execPath, '--test', '--test-reporter=tap'],
      slow: [process.execPath, '-e', 'setTimeout(() => {}, 30000)'],
    },
    runDir: trace.dir,
    sandbox: new LocalSandbox(),
    environment: null,
    builder: null,
    trace,
  };
  const reg = createRegistry(ctx, tools);
  const call = async (name: string, args: unknown) => envelope(await reg.call(name, args));
  return { dir, wt: repo.path, ctx, reg, trace, call };
}

/** Tests read many different payloads; their shapes are what the assertions check. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyResult = ToolResult<any>;

/** Every result has exactly the envelope's fields, consistently filled. */
function envelope(r: ToolResult): AnyResult {
  expect(Object.keys(r).sort()).toEqual(['data', 'error', 'error_code', 'fatal', 'success', 'truncated']);
  expect(typeof r.truncated).toBe('boolean');
  expect(typeof r.fatal).toBe('boolean');
  if (r.success) expect([r.error_code, r.error]).toEqual([null, null]);
  else expect(typeof r.error).toBe('string');
  return r as AnyResult;
}

const expectFail = (r: ToolResult, code: string) => {
  expect(r).toMatchObject({ success: false, error_code: code });
};

describe('path safety', () => {
  let env: Awaited<ReturnType<typeof setup>>;
  let outside: string;
  beforeAll(async () => {
    env = await setup({
      'ok.txt': 'fine\n',
      'sub/inner.txt': 'inner\n',
      'sub/.env': 'A=1\n',
      '.env': 'SECRET=1\n',
      '.env.local': 'SECRET=2\n',
      'vendor/lib/.git': 'gitdir: elsewhere\n',
    });
    outside = path.join(env.dir, 'outside');
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'secret.txt'), 'host secret\n');
    symlinkSync(outside, path.join(env.wt, 'linkdir'));
    symlinkSync(path.join(outside, 'secret.txt'), path.join(env.wt, 'link.txt'));
    symlinkSync('ok.txt', path.join(env.wt, 'inner-link.txt'));
    linkSync(path.join(outside, 'secret.txt'), path.join(env.wt, 'hard.txt'));
  });

  it.each([
    ['../outside/secret.txt', 'path_outside_workspace'],
    ['sub/../../outside/secret.txt', 'path_outside_workspace'],
    ['/etc/passwd', 'path_outside_workspace'],
    ['linkdir/secret.txt', 'path_forbidden'],
    ['link.txt', 'path_forbidden'],
    ['inner-link.txt', 'path_forbidden'],
    ['hard.txt', 'path_forbidden'],
    ['.git/config', 'path_forbidden'],
    ['.git', 'path_forbidden'],
    ['vendor/lib/.git', 'path_forbidden'],
    ['sub/.git/config', 'path_forbidden'],
    ['.GIT/config', 'path_forbidden'],
    ['.env', 'path_forbidden'],
    ['.env.local', 'path_forbidden'],
    ['sub/.env', 'path_forbidden'],
    ['missing.txt', 'not_found'],
  ])('read_file %s → %s', async (p, code) => {
    const r = await env.call('read_file', { path: p });
    expectFail(r, code);
    expect(JSON.stringify(r)).not.toContain('host secret');
  });

  it('refuses writes through links and into forbidden places', async () => {
    expectFail(await env.call('create_file', { path: 'linkdir/new.txt', content: 'x' }), 'path_forbidden');
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
    expectFail(
      await env.call('create_file', { path: 'linkdir/deep/new.txt', content: 'x' }),
      'path_forbidden',
    );
    expect(existsSync(path.join(outside, 'deep'))).toBe(false);
    expectFail(
      await env.call('create_file', { path: '../escape.txt', content: 'x' }),
      'path_outside_workspace',
    );
    expectFail(
      await env.call('create_file', { path: '.git/hooks/pre-commit', content: 'x' }),
      'path_forbidden',
    );
    expectFail(await env.call('create_file', { path: 'a/.env.production', content: 'x' }), 'path_forbidden');
    const hard = sha('host secret\n');
    expectFail(
      await env.call('edit_file', { path: 'hard.txt', old_text: 'host', new_text: 'x', version: hard }),
      'path_forbidden',
    );
    expectFail(await env.call('delete_file', { path: 'link.txt', version: hard }), 'path_forbidden');
    expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('host secret\n');
  });

  it('resolves ordinary paths, also with ./ and inner ..', () => {
    const r = resolveInWorktree(env.wt, './sub/../sub/inner.txt', { mustExist: true });
    expect(r).toMatchObject({ ok: true, rel: 'sub/inner.txt' });
    expect(resolveInWorktree(env.wt, 'sub/nope/x.txt', { forWrite: true })).toMatchObject({
      ok: true,
      stat: null,
    });
    expect(resolveInWorktree(env.wt, '.', { forWrite: true })).toMatchObject({ ok: false });
  });

  it('reads only the file that was checked, not a link or file swapped in after the check', () => {
    const file = path.join(env.dir, 'checked.txt');
    const swap = path.join(env.dir, 'swap.txt');
    writeFileSync(file, 'checked');
    const checked = lstatSync(file);
    expect(readSameFile(file, checked)?.toString()).toBe('checked');
    writeFileSync(swap, 'other');
    renameSync(swap, file);
    expect(readSameFile(file, checked)).toBeNull();
    rmSync(file);
    symlinkSync(path.join(outside, 'secret.txt'), file);
    expect(readSameFile(file, statSync(file))).toBeNull(); // O_NOFOLLOW, even for the link's own target
  });

  it('keeps links, .git and env files out of listings and searches', async () => {
    const list = await env.call('list_files', { max_depth: 5 });
    const paths = list.data.entries.map((e: { path: string }) => e.path);
    expect(paths).not.toContain('.env');
    expect(paths).not.toContain('sub/.env');
    expect(paths.some((p: string) => p.includes('.git'))).toBe(false);
    expect(list.data.entries).toContainEqual({ path: 'linkdir', type: 'symlink' });
    expect(paths).not.toContain('linkdir/secret.txt');
    const search = await env.call('search_code', { query: 'SECRET' });
    expect(search.data.results).toEqual([]);
    const hard = await env.call('search_code', { query: 'host secret' });
    expect(hard.data.results).toEqual([]);
    expect(hard.data.skipped).toContainEqual({ file: 'hard.txt', reason: 'hard_link' });
  });
});

describe('read_file and list_files', () => {
  let env: Awaited<ReturnType<typeof setup>>;
  const twelve = Array.from({ length: 12 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
  beforeAll(async () => {
    env = await setup(
      {
        'a.txt': twelve,
        'b/c.txt': 'c\n',
        'b/d/e.txt': 'e\n',
        'node_modules/x/index.js': 'x\n',
        '__pycache__/m.pyc': 'x',
        'bin.dat': Buffer.from([0, 1, 2, 3]),
        'big.txt': 'y'.repeat(3000),
      },
      { maxReadLines: 5, maxFileBytes: 2000 },
    );
  });

  it('numbers lines, versions the bytes and pages long files', async () => {
    const r = await env.call('read_file', { path: 'a.txt' });
    expect(r.success).toBe(true);
    expect(r.data).toMatchObject({
      version: sha(twelve),
      total_lines: 12,
      start_line: 1,
      end_line: 5,
      clipped: true,
    });
    expect(r.data.content).toBe('    1| line 1\n    2| line 2\n    3| line 3\n    4| line 4\n    5| line 5');
    expect(r.data.hint).toMatch(/start_line=6/);
    const tail = await env.call('read_file', { path: 'a.txt', start_line: 10, end_line: 40 });
    expect(tail.data).toMatchObject({ start_line: 10, end_line: 12, clipped: true });
    expect(tail.data.hint).toMatch(/ends at line 12/);
    const exact = await env.call('read_file', { path: 'a.txt', start_line: 11 });
    expect(exact.data).toMatchObject({ end_line: 12, clipped: false });
    expect(exact.data.content).toBe('   11| line 11\n   12| line 12');
  });

  it('refuses binary, oversized, directories and bad windows', async () => {
    expectFail(await env.call('read_file', { path: 'bin.dat' }), 'binary_file');
    expectFail(await env.call('read_file', { path: 'big.txt' }), 'too_large');
    expectFail(await env.call('read_file', { path: 'b' }), 'is_directory');
    expectFail(await env.call('read_file', { path: 'a.txt', start_line: 13 }), 'invalid_arguments');
    expectFail(
      await env.call('read_file', { path: 'a.txt', start_line: 4, end_line: 2 }),
      'invalid_arguments',
    );
  });

  it('lists sorted entries with types, skipping excluded directories, to the given depth', async () => {
    const r = await env.call('list_files', {});
    expect(r.success).toBe(true);
    expect(r.truncated).toBe(false);
    expect(r.data.entries).toEqual([
      { path: 'a.txt', type: 'file', size: twelve.length },
      { path: 'b', type: 'dir' },
      { path: 'b/c.txt', type: 'file', size: 2 },
      { path: 'b/d', type: 'dir' },
      { path: 'b/d/e.txt', type: 'file', size: 2 },
      { path: 'big.txt', type: 'file', size: 3000 },
      { path: 'bin.dat', type: 'file', size: 4 },
    ]);
    const shallow = await env.call('list_files', { path: 'b', max_depth: 1 });
    expect(shallow.data.entries.map((e: { path: string }) => e.path)).toEqual(['b/c.txt', 'b/d']);
    expectFail(await env.call('list_files', { path: 'a.txt' }), 'invalid_arguments');
  });

  it('cuts listings at maxListEntries and maxScannedEntries', async () => {
    const few = await setup(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`f${i}.txt`, 'x'])), {
      maxListEntries: 10,
    });
    const r = await few.call('list_files', {});
    expect(r.truncated).toBe(true);
    expect(r.data.entries).toHaveLength(10);
    expect(r.data.hint).toBeDefined();
    const scan = await setup(Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`f${i}.txt`, 'x'])), {
      maxScannedEntries: 12,
    });
    const s = await scan.call('list_files', {});
    expect(s.truncated).toBe(true);
    expect(s.data.entries).toHaveLength(12);
  });
});

describe('pages that fit one observation', () => {
  const MAX = 4000;
  /** What the model is sent for a result, with the run's observation cap. */
  const seen = (r: ToolResult) => JSON.parse(renderObservation(r, MAX));

  it('read_file: a 400-line page is never cut in its middle; it ends at a whole line and says where to go on', async () => {
    const text = Array.from({ length: 400 }, (_, i) => `line ${i + 1}: ${'x'.repeat(20)}`).join('\n');
    const { call } = await setup({ 'long.py': `${text}\n` }, { observationMaxChars: MAX });
    const first = seen(await call('read_file', { path: 'long.py' }));
    // Found: the renderer cut `[... 745 of 11782 characters cut ...]` out of the page's middle.
    expect(first.data.content).not.toMatch(/characters cut/);
    expect(first.data).toMatchObject({ start_line: 1, total_lines: 400, clipped: true });
    const end = first.data.end_line;
    expect(end).toBeGreaterThan(50);
    expect(end).toBeLessThan(400);
    expect(first.data.content.split('\n')).toHaveLength(end);
    expect(first.data.content.split('\n').at(-1)).toBe(
      `${String(end).padStart(5)}| line ${end}: ${'x'.repeat(20)}`,
    );
    expect(first.data.hint).toContain(`start_line=${end + 1}`);
    const next = seen(await call('read_file', { path: 'long.py', start_line: end + 1, end_line: end + 5 }));
    expect(next.data).toMatchObject({ start_line: end + 1, end_line: end + 5 });
  });

  it('list_files: a long listing comes in pages of whole entries, in order, none cut from the middle', async () => {
    const files = Object.fromEntries(
      Array.from({ length: 229 }, (_, i) => [`tests/test_${String(i).padStart(3, '0')}.py`, 'x']),
    );
    const { call } = await setup(files, { observationMaxChars: MAX });
    const paths: string[] = [];
    let offset: number | null = 0;
    let pages = 0;
    while (offset !== null) {
      const page = seen(await call('list_files', { path: 'tests', max_depth: 1, offset }));
      expect(page.truncated).toBe(false);
      expect(page.data.total).toBe(229);
      expect(page.data.entries.every((e: unknown) => typeof e === 'object')).toBe(true);
      paths.push(...page.data.entries.map((e: { path: string }) => e.path));
      offset = page.data.next_offset;
      pages++;
    }
    expect(pages).toBeGreaterThan(1);
    expect(paths).toEqual(Object.keys(files).sort());
    expectFail(await call('list_files', { path: 'tests', offset: 229 }), 'invalid_arguments');
  });
});

// Red team: `file_pattern` (model output, up to 200 characters) became a regular expression, one
// `[^/]*` per `*`; against a long file name of the repository V8 backtracked for hours, holding the
// process's event loop (every run, delivery and page) that long. Globs are now matched without search.
it('search_code answers a file_pattern of many `*` against a long file name at once', async () => {
  const name = `${'a'.repeat(200)}.txt`;
  const { call } = await setup({ [name]: 'needle\n', 'b.txt': 'needle\n' });
  const hits = await call('search_code', { query: 'needle', file_pattern: `${'*a'.repeat(20)}*b` });
  expect(hits.data.results).toEqual([]); // was: no answer, ever
  const all = await call('search_code', { query: 'needle', file_pattern: `${'*a'.repeat(20)}*.txt` });
  expect(all.data.results.map((r: { file: string }) => r.file)).toEqual([name]);
});

// Red team: the repository's .gitignore lines became regular expressions (the `ignore` package); a line
// `a*a*a*a*a*a*a*b` against a file name of 200 `a`s (both the repository's own) held the event loop for
// hours at the model's first listing. They are now matched by the same glob matcher.
it('list_files answers over a .gitignore line of many `*` and a long file name, and still applies it', async () => {
  const name = 'a'.repeat(200);
  const { call } = await setup({
    '.gitignore': `${'a*'.repeat(8)}b\n*.py[cod]\n!keep.pyc\nbuild/\n/top.txt\n`,
    [name]: 'x\n',
    [`${name}b`]: 'x\n',
    'm.pyc': 'x\n',
    'keep.pyc': 'x\n',
    'build/out.txt': 'x\n',
    'top.txt': 'x\n',
    'sub/top.txt': 'x\n',
  });
  const listed = await call('list_files', { max_depth: 3 });
  const text = JSON.stringify(listed.data);
  expect(text).toContain(`"${name}"`); // was: no answer, ever
  expect(text).not.toContain(`${name}b`);
  expect(text).not.toContain('m.pyc');
  expect(text).toContain('keep.pyc');
  expect(text).not.toContain('out.txt');
  expect(text).toContain('sub/top.txt');
});

describe('search_code and list_files skip what .gitignore ignores unless include_ignored', () => {
  it('leaves out coverage/ and a nested ignore, and shows them when asked', async () => {
    const { call } = await setup({
      '.gitignore': 'coverage/\n*.log\n',
      'src/a.js': 'const needle = 1;\n',
      'src/.gitignore': 'gen/\n',
      'src/gen/b.js': 'const needle = 2;\n',
      'coverage/lcov-report/a.js.html': 'needle\n',
      'debug.log': 'needle\n',
    });
    // 16 of 34 hits were in coverage/, which git ignores.
    const hits = await call('search_code', { query: 'needle' });
    expect(hits.data.results.map((r: { file: string }) => r.file)).toEqual(['src/a.js']);
    const all = await call('search_code', { query: 'needle', include_ignored: true });
    expect(all.data.results.map((r: { file: string }) => r.file).sort()).toEqual([
      'coverage/lcov-report/a.js.html',
      'debug.log',
      'src/a.js',
      'src/gen/b.js',
    ]);
    const listed = await call('list_files', { max_depth: 5 });
    expect(listed.data.entries.map((e: { path: string }) => e.path)).toEqual([
      '.gitignore',
      'src',
      'src/.gitignore',
      'src/a.js',
    ]);
    const everything = await call('list_files', { max_depth: 1, include_ignored: true });
    expect(everything.data.entries.map((e: { path: string }) => e.path)).toContain('coverage');
  });
});

describe('search_code', () => {
  let env: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    env = await setup(
      {
        'src/re.ts': 'const r = /a.*(b/;\nconst s = "abc";\n',
        'src/deep/x.ts': 'match here\n',
        'lib/y.py': 'match here\nmatch again\n',
        'long.txt': 'z'.repeat(1000) + 'needle' + 'z'.repeat(1000) + '\n',
        'bin.dat': Buffer.concat([Buffer.from('match here'), Buffer.from([0, 0, 1])]),
        'big.txt': 'match here\n' + 'q'.repeat(5000),
        'node_modules/m/i.ts': 'match here\n',
      },
      { maxFileBytes: 4000 },
    );
  });

  it('matches literally: regex metacharacters are plain text', async () => {
    const r = await env.call('search_code', { query: '.*(' });
    expect(r.data.results).toEqual([{ file: 'src/re.ts', line: 1, snippet: 'const r = /a.*(b/;' }]);
    const dot = await env.call('search_code', { query: 'a.c' });
    expect(dot.data.results).toEqual([]);
  });

  it('filters by a glob on the name or the path, and reports skipped files', async () => {
    const all = await env.call('search_code', { query: 'match here' });
    expect(all.data.results.map((m: { file: string }) => m.file)).toEqual(['lib/y.py', 'src/deep/x.ts']);
    expect(all.data.skipped).toEqual(
      expect.arrayContaining([
        { file: 'big.txt', reason: 'too_large' },
        { file: 'bin.dat', reason: 'binary' },
      ]),
    );
    const py = await env.call('search_code', { query: 'match', file_pattern: '*.py' });
    expect(py.data.results).toEqual([
      { file: 'lib/y.py', line: 1, snippet: 'match here' },
      { file: 'lib/y.py', line: 2, snippet: 'match again' },
    ]);
    const ts = await env.call('search_code', { query: 'match', file_pattern: 'src/**/*.ts' });
    expect(ts.data.results.map((m: { file: string }) => m.file)).toEqual(['src/deep/x.ts']);
    const q = await env.call('search_code', { query: 'match', file_pattern: 'y.p?' });
    expect(q.data.results).toHaveLength(2);
    const literalGlob = await env.call('search_code', { query: 'match', file_pattern: '(y).py' });
    expect(literalGlob.data.results).toEqual([]);
  });

  it('bounds snippets and results', async () => {
    const long = await env.call('search_code', { query: 'needle' });
    expect(long.data.results[0].snippet.length).toBeLessThanOrEqual(400);
    expect(long.data.results[0].snippet).toContain('needle');
    const one = await env.call('search_code', { query: 'match', max_results: 1 });
    expect(one.truncated).toBe(true);
    expect(one.data.results).toHaveLength(1);
    expectFail(await env.call('search_code', { query: 'x', max_results: 0 }), 'invalid_arguments');
  });

  it('stops at maxScannedEntries', async () => {
    const many = await setup(
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`d/f${i}.txt`, 'hit\n'])),
      {
        maxScannedEntries: 10,
      },
    );
    const r = await many.call('search_code', { query: 'hit' });
    expect(r.truncated).toBe(true);
    expect(r.data.scan_limit_hit).toBe(true);
    expect(r.data.results.length).toBeLessThan(10);
  });
});

describe('edit_file, create_file, delete_file', () => {
  let env: Awaited<ReturnType<typeof setup>>;
  const py = 'def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n\nx = 1\n';
  beforeAll(async () => {
    env = await setup(
      {
        'calc.py': py,
        'crlf.txt': 'one\r\ntwo\r\nthree\r\n',
        'run.sh': '#!/bin/sh\necho hi\n',
        'gone.txt': 'bye\n',
      },
      { maxFileBytes: 500 },
    );
    chmodSync(path.join(env.wt, 'run.sh'), 0o755);
  });
  const read = async (p: string) => (await env.call('read_file', { path: p })).data.version as string;

  it('replaces a unique occurrence and returns the region with context and the new version', async () => {
    const version = await read('calc.py');
    const r = await env.call('edit_file', {
      path: 'calc.py',
      old_text: 'def add(a, b):\n    return a - b',
      new_text: 'def add(a, b):\n    return a + b',
      version,
    });
    expect(r.success).toBe(true);
    const now = readFileSync(path.join(env.wt, 'calc.py'), 'utf8');
    expect(now).toBe(py.replace('return a - b', 'return a + b'));
    expect(r.data.version).toBe(sha(now));
    expect(r.data.changed_lines).toEqual([1, 2]);
    expect(r.data.region).toBe(
      '    1| def add(a, b):\n    2|     return a + b\n    3| \n    4| \n    5| def sub(a, b):',
    );
  });

  it('rejects stale versions, no-ops, missing and ambiguous text', async () => {
    const stale = sha(py);
    const st = await env.call('edit_file', {
      path: 'calc.py',
      old_text: 'x = 1',
      new_text: 'x = 2',
      version: stale,
    });
    expectFail(st, 'stale_version');
    expect(st.error).toMatch(/re-read/);
    const version = await read('calc.py');
    expectFail(
      await env.call('edit_file', { path: 'calc.py', old_text: 'x = 1', new_text: 'x = 1', version }),
      'no_op',
    );
    const multi = await env.call('edit_file', {
      path: 'calc.py',
      old_text: '    return a',
      new_text: 'r',
      version,
    });
    expectFail(multi, 'multiple_matches');
    expect(multi.data.lines).toEqual([2, 6]);
    const two = await env.call('edit_file', {
      path: 'calc.py',
      old_text: '(a, b):',
      new_text: '(a, b, c):',
      version,
    });
    expect(two.data.lines).toEqual([1, 5]);
    expect(two.error).toMatch(/lines 1, 5/);
    const none = await env.call('edit_file', {
      path: 'calc.py',
      old_text: 'def sub(a, c):',
      new_text: 'x',
      version,
    });
    expectFail(none, 'no_match');
    expect(none.data.whitespace_only).toBe(false);
    expect(none.data.closest[0]).toEqual({ line: 5, text: 'def sub(a, b):' });
    expect(none.error).toContain('5: def sub(a, b):');
    const ws = await env.call('edit_file', {
      path: 'calc.py',
      old_text: 'def sub(a,  b):\n  return a - b',
      new_text: 'x',
      version,
    });
    expectFail(ws, 'no_match');
    expect(ws.data.whitespace_only).toBe(true);
    expect(ws.error).toMatch(/only whitespace differs/);
    expect(ws.error).toMatch(/lines 5-6/);
    const big = await env.call('edit_file', {
      path: 'calc.py',
      old_text: 'x = 1',
      new_text: 'x'.repeat(600),
      version,
    });
    expectFail(big, 'too_large');
    expect(readFileSync(path.join(env.wt, 'calc.py'), 'utf8')).toBe(
      py.replace('return a - b', 'return a + b'),
    );
  });

  it('keeps CRLF line endings and the file mode', async () => {
    const r = await env.call('edit_file', {
      path: 'crlf.txt',
      old_text: 'one\ntwo',
      new_text: 'one\n2\nand more',
      version: await read('crlf.txt'),
    });
    expect(r.success).toBe(true);
    expect(readFileSync(path.join(env.wt, 'crlf.txt'), 'utf8')).toBe('one\r\n2\r\nand more\r\nthree\r\n');
    expect(r.data.version).toBe(sha('one\r\n2\r\nand more\r\nthree\r\n'));
    const sh = await env.call('edit_file', {
      path: 'run.sh',
      old_text: 'hi',
      new_text: 'hello',
      version: await read('run.sh'),
    });
    expect(sh.success).toBe(true);
    expect(statSync(path.join(env.wt, 'run.sh')).mode & 0o777).toBe(0o755);
  });

  it('creates new files only, with parent directories, within the size limit', async () => {
    const r = await env.call('create_file', { path: 'pkg/new/mod.py', content: 'X = 1\n' });
    expect(r.success).toBe(true);
    expect(r.data.version).toBe(sha('X = 1\n'));
    expect(readFileSync(path.join(env.wt, 'pkg/new/mod.py'), 'utf8')).toBe('X = 1\n');
    expectFail(await env.call('create_file', { path: 'calc.py', content: 'x' }), 'already_exists');
    expectFail(await env.call('create_file', { path: 'pkg', content: 'x' }), 'already_exists');
    expectFail(await env.call('create_file', { path: 'huge.txt', content: 'x'.repeat(501) }), 'too_large');
    expect(existsSync(path.join(env.wt, 'huge.txt'))).toBe(false);
    expectFail(await env.call('create_file', { path: 'calc.py/x', content: 'x' }), 'not_found');
  });

  it('deletes only the current version', async () => {
    expectFail(await env.call('delete_file', { path: 'gone.txt', version: sha('other') }), 'stale_version');
    expect(existsSync(path.join(env.wt, 'gone.txt'))).toBe(true);
    const r = await env.call('delete_file', { path: 'gone.txt', version: sha('bye\n') });
    expect(r).toMatchObject({ success: true, data: { deleted: true } });
    expect(existsSync(path.join(env.wt, 'gone.txt'))).toBe(false);
    expectFail(await env.call('delete_file', { path: 'gone.txt', version: sha('bye\n') }), 'not_found');
  });
});

describe('protected paths', () => {
  it('refuses to edit, create or delete a path the repository protects, and says why', async () => {
    const env = await setup({
      LICENSE: 'MIT\n',
      'migrations/001.sql': 'create table t();\n',
      'app.py': 'x = 1\n',
    });
    const ctx = { ...env.ctx, protectedPaths: ['LICENSE', 'migrations/'] };
    const reg = createRegistry(ctx);
    const version = sha('MIT\n');
    const edit = await reg.call('edit_file', { path: 'LICENSE', old_text: 'MIT', new_text: 'GPL', version });
    expectFail(edit, 'path_forbidden');
    expect(edit.error).toMatch(/LICENSE is protected/);
    expectFail(
      await reg.call('create_file', { path: 'migrations/002.sql', content: 'drop table t;\n' }),
      'path_forbidden',
    );
    const sql = sha('create table t();\n');
    expectFail(await reg.call('delete_file', { path: 'migrations/001.sql', version: sql }), 'path_forbidden');
    expect(readFileSync(path.join(env.wt, 'LICENSE'), 'utf8')).toBe('MIT\n');
    expect(existsSync(path.join(env.wt, 'migrations/002.sql'))).toBe(false);
    // Elsewhere edits work as usual, and a look-alike prefix is not protected.
    expect((await reg.call('create_file', { path: 'migrations2.txt', content: 'ok\n' })).success).toBe(true);
    const app = await reg.call('edit_file', {
      path: 'app.py',
      old_text: 'x = 1',
      new_text: 'x = 2',
      version: sha('x = 1\n'),
    });
    expect(app.success).toBe(true);
  });

  // Issue 10, item 7: these entries passed validation but, matched as literal prefixes, protected nothing.
  it.each([
    [
      './migrations',
      ['migrations/001.sql', 'migrations/a/2.sql'],
      'migrations/003.sql',
      ['migrations2/1.sql'],
    ],
    [
      'migrations/',
      ['migrations/001.sql', 'migrations/a/2.sql'],
      'migrations/003.sql',
      ['migrations2/1.sql'],
    ],
    [
      'migrations/**',
      ['migrations/001.sql', 'migrations/a/2.sql'],
      'migrations/b/3.sql',
      ['migrations2/1.sql'],
    ],
    ['migrations/*.sql', ['migrations/001.sql'], 'migrations/003.sql', ['migrations/notes.txt', 'x/001.sql']],
    [
      '**/secrets.txt',
      ['secrets.txt', 'config/deep/secrets.txt'],
      'new/secrets.txt',
      ['config/my-secrets.txt'],
    ],
  ])('protects %s in edit, create and delete', async (entry, protectedFiles, created, freeFiles) => {
    const env = await setup(Object.fromEntries([...protectedFiles, ...freeFiles].map((f) => [f, 'old\n'])));
    const reg = createRegistry({ ...env.ctx, protectedPaths: [entry] });
    const edit = (file: string) =>
      reg.call('edit_file', { path: file, old_text: 'old', new_text: 'new', version: sha('old\n') });
    for (const file of protectedFiles) {
      const refused = await edit(file);
      expectFail(refused, 'path_forbidden');
      expect(refused.error).toContain('protected');
      expectFail(await reg.call('delete_file', { path: file, version: sha('old\n') }), 'path_forbidden');
      expect(readFileSync(path.join(env.wt, file), 'utf8')).toBe('old\n');
    }
    expectFail(await reg.call('create_file', { path: created, content: 'x\n' }), 'path_forbidden');
    expect(existsSync(path.join(env.wt, created))).toBe(false);
    for (const file of freeFiles) expect((await edit(file)).success).toBe(true);
  });
});

describe('registry', () => {
  it('offers every tool with a strict JSON schema', async () => {
    const { reg } = await setup({ 'a.txt': 'a\n' });
    expect(reg.names()).toEqual(
      expect.arrayContaining([
        'list_files',
        'read_file',
        'search_code',
        'edit_file',
        'create_file',
        'delete_file',
        'run_tests',
        'git_diff',
      ]),
    );
    for (const s of reg.schemas()) {
      expect(s.type).toBe('function');
      expect(s.function.parameters).toMatchObject({ type: 'object', additionalProperties: false });
      expect(s.function.parameters).not.toHaveProperty('$schema');
    }
    // Every request carries the schemas: zod's safe-integer bounds are no limit of ours, only characters.
    expect(JSON.stringify(reg.schemas())).not.toContain(String(Number.MAX_SAFE_INTEGER));
    expect(JSON.stringify(FINISH_SCHEMA)).not.toMatch(/\$schema|9007199254740991/);
    const list = reg.schemas().find((s) => s.function.name === 'list_files');
    expect(list?.function.parameters).toMatchObject({
      properties: { max_depth: { minimum: 1, maximum: 10, default: 3 } },
    });
    expect(list?.function.parameters.required).toBeUndefined();
  });

  it('rejects unknown tools, unknown fields, wrong types and out-of-range values', async () => {
    const { call, wt } = await setup({ 'a.txt': 'a\n' });
    const unknown = await call('rm_rf', {});
    expectFail(unknown, 'unknown_tool');
    expect(unknown.error).toContain('read_file');
    const field = await call('read_file', { path: 'a.txt', worktree: '/' });
    expectFail(field, 'invalid_arguments');
    expect(field.error).toMatch(/worktree/);
    for (const bad of [{ sandbox: null }, { limits: { maxFileBytes: 1e9 } }]) {
      expectFail(await call('list_files', bad), 'invalid_arguments');
    }
    const type = await call('read_file', { path: 3 });
    expectFail(type, 'invalid_arguments');
    expect(type.data.issues).toEqual([expect.objectContaining({ path: 'path' })]);
    expectFail(await call('list_files', { max_depth: 11 }), 'invalid_arguments');
    expectFail(await call('list_files', { max_depth: 1.5 }), 'invalid_arguments');
    expectFail(await call('read_file', {}), 'invalid_arguments');
    expectFail(await call('run_tests', { timeout: 1801 }), 'invalid_arguments'); // default ceiling: 1800 s
    expect((await call('git_diff', null)).success).toBe(true);
    expect(readFileSync(path.join(wt, 'a.txt'), 'utf8')).toBe('a\n');
  });

  it('traces tool_start and tool_end for every call', async () => {
    const { call, trace } = await setup({ 'a.txt': 'a\n' });
    await call('read_file', { path: 'a.txt' });
    await call('read_file', { path: 'nope' });
    const events = trace.readEvents().filter((e) => e.type.startsWith('tool_'));
    expect(events.map((e) => [e.type, e.name])).toEqual([
      ['tool_start', 'read_file'],
      ['tool_end', 'read_file'],
      ['tool_start', 'read_file'],
      ['tool_end', 'read_file'],
    ]);
    expect(events[1]).toMatchObject({ args: { path: 'a.txt' }, error: null, result: { success: true } });
    expect(typeof events[1]?.duration_ms).toBe('number');
    expect(events[3]).toMatchObject({ error: 'not_found' });
  });

  it('turns an unwritable trace into a fatal result', async () => {
    const { call, trace } = await setup({ 'a.txt': 'a\n' });
    rmSync(trace.dir, { recursive: true, force: true });
    const r = await call('read_file', { path: 'a.txt' });
    expect(r).toMatchObject({ success: false, fatal: true });
    expect(r.error).toMatch(/trace unwritable/);
  });

  it('turns an isolation breach into a fatal result, other crashes into internal_error', async () => {
    const { ctx } = await setup({ 'a.txt': 'a\n' });
    const args = z.strictObject({});
    const reg = createRegistry(ctx, [
      {
        name: 'breach',
        description: '',
        args,
        mutates: false,
        run: async () => Promise.reject(new IsolationError('escaped')),
      },
      {
        name: 'reported',
        description: '',
        args,
        mutates: false,
        run: async () => fail('isolation_lost', 'gone'),
      },
      {
        name: 'crash',
        description: '',
        args,
        mutates: false,
        run: async () => Promise.reject(new Error('boom')),
      },
    ]);
    expect(await reg.call('breach', {})).toMatchObject({ error_code: 'isolation_lost', fatal: true });
    expect(await reg.call('reported', {})).toMatchObject({ error_code: 'isolation_lost', fatal: true });
    expect(await reg.call('crash', {})).toMatchObject({ error_code: 'internal_error', fatal: false });
  });

  it('runs concurrent calls one at a time', async () => {
    const { ctx } = await setup({ 'a.txt': 'a\n' });
    const log: string[] = [];
    const slow: ToolDefinition = {
      name: 'slow',
      description: '',
      args: z.strictObject({ id: z.int() }),
      mutates: false,
      async run(_ctx, args: { id: number }) {
        log.push(`start ${args.id}`);
        await new Promise((r) => setTimeout(r, 30 - args.id * 10));
        log.push(`end ${args.id}`);
        return ok(args.id);
      },
    };
    const reg = createRegistry(ctx, [slow]);
    const results = await Promise.all([0, 1, 2].map((id) => reg.call('slow', { id })));
    expect(results.map((r) => r.data)).toEqual([0, 1, 2]);
    expect(log).toEqual(['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2']);
  });
});

describe('run_tests, git_diff and test staleness', () => {
  const files = {
    'calc.mjs': 'export const add = (a, b) => a - b;\n',
    'calc.test.mjs':
      "import test from 'node:test';\nimport assert from 'node:assert';\nimport { add } from './calc.mjs';\n" +
      "test('adds', () => assert.equal(add(1, 2), 3));\ntest('zero', () => assert.equal(add(0, 0), 0));\n",
  };

  it('runs the named target in the sandbox and marks results stale after edits', async () => {
    const { call, reg, wt, ctx } = await setup(files);
    expect(reg.hasEdits()).toBe(false);
    // The loop asks the registry which tools change files (stale reads, files_edited).
    expect([reg.mutates('edit_file'), reg.mutates('read_file'), reg.mutates('no_such_tool')]).toEqual([
      true,
      false,
      false,
    ]);
    const first = await call('run_tests', {});
    expect(first.success).toBe(true);
    expect(first.data).toMatchObject({
      status: 'failed',
      exit_code: 1,
      summary: { passed: 1, failed: 1, source: 'node-test' },
      stale_previous: null,
    });
    expect(first.data.revision).toMatch(/^[0-9a-f]{40}$/);
    expect(reg.lastTest()).toMatchObject({ status: 'failed', revision: first.data.revision, stale: false });

    const version = (await call('read_file', { path: 'calc.mjs' })).data.version;
    expect(reg.lastTest()?.stale).toBe(false); // reads do not make results stale
    await call('edit_file', { path: 'calc.mjs', old_text: 'a - b', new_text: 'a + b', version });
    expect(reg.hasEdits()).toBe(true);
    expect(reg.lastTest()).toMatchObject({ status: 'failed', stale: 'files changed since' });

    const second = await call('run_tests', { target: 'default', timeout: 30 });
    expect(second.data).toMatchObject({ status: 'passed', summary: { passed: 2, failed: 0 } });
    expect(second.data.revision).not.toBe(first.data.revision);
    expect(second.data.stale_previous).toMatchObject({ status: 'failed', revision: first.data.revision });
    expect(reg.lastTest()).toMatchObject({ status: 'passed', revision: second.data.revision, stale: false });

    const diff = await call('git_diff', {});
    expect(diff.data).toMatchObject({
      base_commit: ctx.baseCommit,
      files: ['calc.mjs'],
      patch_path: path.join(ctx.runDir, 'current.patch'),
    });
    expect(diff.data.preview).toContain('+export const add = (a, b) => a + b;');
    expect(readFileSync(diff.data.patch_path, 'utf8')).toBe(diff.data.preview);
    expect(readFileSync(path.join(wt, 'calc.mjs'), 'utf8')).toContain('a + b');
  });

  it('last_test comes only from run_tests of the workspace, says what it covered, and goes stale after a rebuild', async () => {
    // A stand-in for build_environment: the registry knows the tool by name.
    const rebuild: ToolDefinition = {
      name: 'build_environment',
      description: 'builds',
      args: z.strictObject({}),
      mutates: false,
      run: async () => ok({ image_id: 'sha256:1' }),
    };
    const { call, reg, ctx } = await setup(files, { runCommandLocal: true }, [...DEFAULT_TOOLS, rebuild]);
    const context = new ContextManager(
      { ...loadConfig({}).context, observationMaxChars: ctx.limits.observationMaxChars },
      'S',
      'T',
      () => ({ last_test: lastTestState(reg.lastTest()), budget_left: null }),
    );
    const seen = async (name: string, args: Record<string, unknown>) =>
      context.addObservation(name, name, args, await call(name, args), false);
    await seen('run_tests', {});
    expect(context.state.last_test).toMatchObject({ status: 'failed', tests: 'all', stale: false });
    // Found: a passing run_command after a failing run_tests showed last_test passed.
    await seen('run_command', { argv: ['true'] });
    expect(context.state.last_test).toMatchObject({ status: 'failed', exit_code: 1, tests: 'all' });
    await seen('run_tests', { tests: ['zero'] });
    expect(context.state.last_test).toMatchObject({ status: 'passed', tests: ['zero'], stale: false });
    await seen('build_environment', {});
    expect(context.state.last_test).toMatchObject({ status: 'passed', stale: 'environment rebuilt since' });
    // Without a checkout of the base this run cannot test it; the record is unchanged either way.
    expect(await call('run_tests', { at: 'base' })).toMatchObject({ error_code: 'not_allowed' });
    expect(reg.lastTest()).toMatchObject({ tests: ['zero'], stale: 'environment rebuilt since' });
    expect(ctx.baseTree).toBeUndefined();
  });

  it('runs only the selected tests and leads with the failures', async () => {
    const { call } = await setup(files);
    const one = await call('run_tests', { tests: ['adds'] });
    expect(one.data.command).toEqual([
      process.execPath,
      '--test',
      '--test-name-pattern=adds',
      '--test-reporter=tap',
    ]);
    expect(one.data).toMatchObject({ tests: ['adds'], status: 'failed', summary: { passed: 0, failed: 1 } });
    expect(one.data.failures).toEqual([
      { id: 'adds', message: expect.stringMatching(/^error: '-1 == 3'$/m) },
    ]);
    // The block is in failures, once: the output points to it.
    expect(one.data.stdout).toContain('[failure of adds: in failures]');
    expect(one.data.stdout).not.toContain("error: '-1 == 3'");
    expect(Object.keys(one.data).indexOf('failures')).toBeLessThan(Object.keys(one.data).indexOf('stdout'));
    const zero = await call('run_tests', { tests: ['zero'] });
    expect(zero.data).toMatchObject({ status: 'passed', failures: [], summary: { passed: 1, failed: 0 } });
    expectFail(await call('run_tests', { tests: ['--help'] }), 'invalid_arguments');
  });

  it('run_command: refused on the host unless allowed; then argv or script, never both', async () => {
    const { call } = await setup(files);
    const refused = await call('run_command', { argv: ['touch', 'pwned'] });
    expectFail(refused, 'not_allowed');
    expect(refused.error).toMatch(/AGENTICFIX_RUN_COMMAND_LOCAL/);
    const allowed = await setup(files, { runCommandLocal: true });
    const argv = await allowed.call('run_command', { argv: [process.execPath, '-e', 'console.log(6 * 7)'] });
    expect(argv.data).toMatchObject({ status: 'passed', exit_code: 0, stdout: '42\n' });
    const script = await allowed.call('run_command', { script: 'echo out; echo err >&2; exit 3' });
    expect(script.success).toBe(true);
    expect(script.data).toMatchObject({ command: ['/bin/sh', '-c', 'echo out; echo err >&2; exit 3'] });
    expect(script.data).toMatchObject({ status: 'failed', exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
    expectFail(await allowed.call('run_command', { argv: ['true'], script: 'true' }), 'invalid_arguments');
    expectFail(await allowed.call('run_command', {}), 'invalid_arguments');
    expectFail(await allowed.call('run_command', { script: 'sleep 5', timeout: 1 }), 'timeout');
  });

  it('reports timeouts, unknown targets and a missing environment', async () => {
    const { call, ctx } = await setup(files);
    const slow = await call('run_tests', { target: 'slow', timeout: 1 });
    expectFail(slow, 'timeout');
    expect(slow.data).toMatchObject({ status: 'timeout', exit_code: null });
    const unknown = await call('run_tests', { target: 'e2e' });
    expectFail(unknown, 'invalid_arguments');
    expect(unknown.error).toMatch(/default, slow/);
    expectFail(await call('run_tests', { target: 'constructor' }), 'invalid_arguments');
    ctx.sandbox = null;
    const none = await call('run_tests', {});
    expectFail(none, 'no_environment');
    expect(none.error).toBe('No test environment yet: call build_environment with a Dockerfile first.');
  });

  it('states the real maximum timeout, and derives later limits from the first full run', async () => {
    const limits = { maxTestTimeoutMs: 300_000, minTestTimeoutMs: 2_000 };
    const { call, ctx, reg } = await setup(files, limits);
    for (const tool of ['run_tests', 'run_command']) {
      const schema = reg.schemas().find((s) => s.function.name === tool)!.function.parameters as {
        properties: { timeout: { maximum: number; description: string } };
      };
      // It said 86,400 and refused anything above 60 with "between 1 and 60".
      expect(schema.properties.timeout.maximum).toBe(300);
      expect(schema.properties.timeout.description).toMatch(/at most 300\b.*5 × its time \(at least 2 s\)/);
    }
    const over = await call('run_tests', { timeout: 301 });
    expectFail(over, 'invalid_arguments');
    expect(over.error).toMatch(/300/);
    // A run that timed out, or one of another target, measures nothing: the limit stays the ceiling.
    expectFail(await call('run_tests', { target: 'slow', timeout: 1 }), 'timeout');
    expect(ctx.suiteMs).toBeUndefined();
    const first = await call('run_tests', {});
    expect(first.data.time_limit_s).toBe(300);
    expect(ctx.suiteMs).toBe(first.data.duration_ms);
    const second = await call('run_tests', {});
    const derived = Math.max(2, Math.ceil((first.data.duration_ms * 5) / 1000));
    expect(second.data.time_limit_s).toBe(Math.min(300, derived));
    expect(ctx.suiteMs).toBe(first.data.duration_ms); // the first full run is the measure
  });

  it('measures the suite again after each environment rebuild, and tells when a build runs', async () => {
    const { ctx } = await setup(files, { maxTestTimeoutMs: 300_000, minTestTimeoutMs: 2_000 });
    let image = 0;
    const events: (boolean | string)[] = [];
    const builder: EnvironmentBuilder = {
      build: async () => ({
        ...(events.push('build') && {}),
        success: true,
        image_id: `sha256:${++image}`,
        image_tag: null,
        cache_hit: false,
        duration_ms: 1,
        network: { proxy: false, ca: false },
        log: { exit_status: 'ok', head: [], tail: [], error_lines: [], total_lines: 0, truncated: false },
        warnings: [],
        cached_steps: [],
        error: null,
      }),
      sandboxFor: () => new LocalSandbox(),
      runSandboxFor: () => new LocalSandbox(),
      localBaseImages: async () => [],
    };
    // The build's time is the environment's (phases_ms), not the agent's: 342 s showed as 36 ms.
    const c: ToolContext = { ...ctx, builder, onBuilding: (b) => events.push(b) };
    const reg = createRegistry(c, [...DEFAULT_TOOLS, makeBuildEnvironmentTool()]);
    const call = async (name: string, args: unknown) => envelope(await reg.call(name, args));
    const built = await call('build_environment', { dockerfile: 'FROM x\n' });
    expect(built.success).toBe(true);
    await call('run_tests', {});
    const measured = c.suiteMs;
    expect(measured).toEqual(expect.any(Number));
    // A limit measured in a wrong environment (or under other load) bound every later run.
    await call('build_environment', { dockerfile: 'FROM y\n' });
    expect(c.suiteMs).toBeNull();
    await call('run_tests', {});
    expect(c.suiteMs).toEqual(expect.any(Number));
    expect(events).toEqual([true, 'build', false, true, 'build', false]);
  });

  it("an image whose runtime versions were read before (a rerun's cached environment) runs nothing for them", async () => {
    const { ctx } = await setup(files);
    const image = `sha256:${randomUUID()}`;
    const local = new LocalSandbox();
    let runs = 0;
    const counting: ToolContext['sandbox'] = Object.assign(Object.create(local) as LocalSandbox, {
      run: (req: Parameters<LocalSandbox['run']>[0]) => (runs++, local.run(req)),
    });
    const built = (cache_hit: boolean) => ({
      success: true,
      image_id: image,
      image_tag: null,
      cache_hit,
      duration_ms: 1,
      network: { proxy: false, ca: false },
      log: {
        exit_status: 'ok' as const,
        head: [],
        tail: [],
        error_lines: [],
        total_lines: 0,
        truncated: false,
      },
      warnings: [],
      cached_steps: [],
      error: null,
    });
    let builds = 0;
    const builder: EnvironmentBuilder = {
      build: async () => built(builds++ > 0),
      sandboxFor: () => counting,
      runSandboxFor: () => counting,
      localBaseImages: async () => [],
    };
    const reg = createRegistry({ ...ctx, builder }, [...DEFAULT_TOOLS, makeBuildEnvironmentTool()]);
    const build = async () => envelope(await reg.call('build_environment', { dockerfile: 'FROM x\n' }));
    const first = await build();
    expect(first.data.runtime['node --version']).toBe(process.version);
    expect(runs).toBe(1);
    const again = await build();
    expect(again.data).toMatchObject({ cache_hit: true, runtime: first.data.runtime });
    expect(runs).toBe(1);
  });

  it('bounds the diff preview', async () => {
    const { call, ctx } = await setup({ 'a.txt': 'a\n' });
    const created = await call('create_file', { path: 'big.txt', content: 'line\n'.repeat(5000) });
    expect(created.success).toBe(true);
    const diff = await call('git_diff', {});
    expect(diff.truncated).toBe(true);
    expect(diff.data.preview.length).toBeLessThan(10_100);
    expect(readFileSync(path.join(ctx.runDir, 'current.patch'), 'utf8').length).toBeGreaterThan(25_000);
  });
});
