import { jest } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { aggregateEval, type EvalRecord } from '../../../src/cli/eval.js';
import { verifyCommand } from '../../../src/cli/verify.js';
import { makeSourceRepo } from '../../support/git-fixtures.js';

let root: string;
let repo: string;
const saved = { ...process.env };

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'verify-cli-'));
  process.env.AGENTICFIX_HOME = path.join(root, 'home');
  repo = (await makeSourceRepo(path.join(root, 'repo'), { 'a.py': 'x = 1\n' })).path;
});
afterAll(async () => {
  process.env = saved;
  await rm(root, { recursive: true, force: true });
});

/** Runs the command, capturing what it prints. */
async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = jest.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    return { code: await verifyCommand(argv), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

/** The flags of a verification of `patch` on the fixture's main. */
const verifyArgs = (patch: string, dockerfile: string, test: string) => [
  '--repo',
  repo,
  '--base',
  'main',
  '--patch',
  patch,
  '--dockerfile',
  dockerfile,
  '--test',
  test,
];

describe('agenticfix verify', () => {
  test('usage errors exit 2 and say what is missing', async () => {
    expect((await cli([])).err).toMatch(/^agenticfix verify: --patch is required/);
    const patch = path.join(root, 'p.diff');
    await writeFile(patch, '');
    const r = await cli(['--patch', patch, '--repo', repo]);
    expect(r).toMatchObject({ code: 2 });
    expect(r.err).toMatch(/missing --base, --dockerfile, --test/);
    expect((await cli(['--bogus'])).code).toBe(2);
  });

  test('a patch that does not apply: exit 1, Markdown or JSON evidence', async () => {
    const patch = path.join(root, 'bad.diff');
    await writeFile(patch, 'diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n');
    const dockerfile = path.join(root, 'Dockerfile');
    await writeFile(dockerfile, 'FROM agenticfix/debian:bookworm\n');
    const args = verifyArgs(patch, dockerfile, 'python3 -m pytest');
    const md = await cli(args);
    expect(md.code).toBe(1);
    expect(md.out).toMatch(/^## AgenticFix verification: `patch_does_not_apply`/);
    const json = await cli([...args, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({
      verdict: 'patch_does_not_apply',
      patch: { files: ['a.py'], source_files: ['a.py'] },
    });
  });

  test('an empty patch is empty_patch; text that is no git patch does not apply', async () => {
    const patch = path.join(root, 'empty.diff');
    await writeFile(patch, '\n');
    const r = await cli([...verifyArgs(patch, patch, 'pytest'), '--json']);
    expect(JSON.parse(r.out)).toMatchObject({ verdict: 'empty_patch' });
    await writeFile(patch, 'not a diff\n');
    const junk = await cli([...verifyArgs(patch, patch, 'pytest'), '--json']);
    expect(JSON.parse(junk.out)).toMatchObject({ verdict: 'patch_does_not_apply' });
  });

  test('--task takes rows as datasets write them: extra fields ignored with one warning per file', async () => {
    const patch = path.join(root, 'task.diff');
    await writeFile(patch, 'diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n');
    const row = (instance_id: string) => ({
      instance_id,
      repo,
      base_commit: 'main',
      problem_statement: 'x should be 3',
      test_patch: '',
      FAIL_TO_PASS: '["test_a.py::test_x"]',
      PASS_TO_PASS: [],
      test_command: 'python3 -m pytest',
      dockerfile: 'FROM agenticfix/debian:bookworm\n',
      // SWE-bench's own unused fields pass silently; other datasets' fields are named once.
      version: '1.0',
      hints_text: '',
      language: 'python',
      image_name: 'example/calc:1',
      install: { pre: ['pip install -e .'] },
    });
    const tasks = path.join(root, 'tasks.jsonl');
    await writeFile(tasks, [row('calc-1'), row('calc-2')].map((r) => JSON.stringify(r)).join('\n') + '\n');
    const r = await cli(['--task', tasks, '--instance', 'calc-2', '--patch', patch, '--json']);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out)).toMatchObject({ verdict: 'patch_does_not_apply' });
    expect(r.err.trim().split('\n')).toEqual([
      `agenticfix verify: warning: ${tasks}: ignored fields no task field takes: image_name, install, language`,
    ]);
    // Required fields stay strict.
    const { problem_statement: _, ...missing } = row('calc-3');
    await writeFile(tasks, JSON.stringify(missing) + '\n');
    await expect(cli(['--task', tasks, '--instance', 'calc-3', '--patch', patch])).rejects.toThrow(
      /tasks.jsonl:1: invalid task: problem_statement:/,
    );
  });
});

test('eval aggregation: resolved per run, mean, pass@K and per-task cost', () => {
  const rec = (instance_id: string, run: number, resolved: boolean, tokens: number): EvalRecord => ({
    instance_id,
    run,
    resolved,
    verdict: resolved ? 'verified' : 'no_reproduction',
    tokens,
    duration_ms: 1000 * run,
  });
  const s = aggregateEval(
    [rec('a', 1, true, 100), rec('b', 1, false, 300), rec('a', 2, false, 200), rec('b', 2, false, 500)],
    [[], []],
    2,
  );
  expect(s).toMatchObject({
    tasks: 2,
    runs: 2,
    resolved_per_run: [1, 0],
    mean_resolved: 0.5,
    pass_at_k: 0.5,
  });
  expect(s.per_task).toEqual([
    { instance_id: 'a', resolved_runs: 1, mean_tokens: 150, mean_duration_ms: 1500 },
    { instance_id: 'b', resolved_runs: 0, mean_tokens: 400, mean_duration_ms: 1500 },
  ]);
});
