import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { ImageLeases } from '../../../src/images/leases.js';
import { git } from '../../../src/workspace/git.js';
import { judge } from '../../../src/verify/judge.js';
import { renderMarkdown } from '../../../src/verify/markdown.js';
import { gradeInstance, loadTasks, summarize } from '../../../src/verify/task.js';
import type { RebuildPolicy } from '../../../src/config/repo-config.js';
import { VerificationReportSchema, type VerificationReport } from '../../../src/verify/types.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { compose } from '../../../src/cli/compose.js';

const FIXTURES = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'), 'fixtures');
const describeDocker = describeIf(await needDocker());
const docker = new Docker();
const leasesOf = async (runId: string) =>
  (await ImageLeases.list(docker, 30_000)).filter((l) => l.run === runId);

interface Repo {
  dir: string;
  sha: string;
  dockerfile: string;
}

/** A real git repository from a fixture directory, with one commit. */
async function fixtureRepo(root: string, name: string): Promise<Repo> {
  const dir = path.join(root, name);
  await cp(path.join(FIXTURES, name, 'repo'), dir, { recursive: true });
  await git(['init', '-q', '-b', 'main'], { cwd: dir });
  await git(['add', '-A'], { cwd: dir });
  await git(['commit', '-q', '-m', 'base'], { cwd: dir });
  const sha = (await git(['rev-parse', 'HEAD'], { cwd: dir })).stdout.trim();
  return { dir, sha, dockerfile: await readFile(path.join(FIXTURES, name, 'Dockerfile'), 'utf8') };
}

/** The patch a developer would get by editing files (null deletes), as `git diff` writes it; the repository is left clean. */
async function makePatch(repo: Repo, edits: Record<string, string | null>): Promise<string> {
  for (const [file, content] of Object.entries(edits)) {
    const p = path.join(repo.dir, file);
    if (content === null) await rm(p);
    else {
      await mkdir(path.dirname(p), { recursive: true });
      await writeFile(p, content);
    }
  }
  await git(['add', '-A'], { cwd: repo.dir });
  const patch = (await git(['diff', '--cached', '--binary', 'HEAD'], { cwd: repo.dir })).stdout;
  await git(['reset', '-q', '--hard', 'HEAD'], { cwd: repo.dir });
  await git(['clean', '-qfdx'], { cwd: repo.dir });
  return patch;
}

const PY_TEST = ['python3', '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests'];

const FIXED_CALC = `"""A tiny calculator."""


def add(a, b):
    return a + b


def divide(a, b):
    if b == 0:
        raise ValueError("division by zero")
    return a / b
`;
const NEW_TEST = `import pytest

from calc import divide


def test_divide_by_zero():
    with pytest.raises(ValueError):
        divide(1, 0)
`;

describeDocker('judge on a Python/pytest fixture (real git, real Docker)', () => {
  let root: string;
  let config: Config;
  let repo: Repo;
  const reports: Record<string, VerificationReport> = {};
  const run = (name: string, patch: string, rebuild: RebuildPolicy = 'changed') =>
    judge({
      ...compose(config),
      config,
      remote: repo.dir,
      baseCommit: 'main',
      patch,
      dockerfile: repo.dockerfile,
      testArgv: PY_TEST,
      rebuild,
      runId: `t-${name}`,
    }).then((r) => (reports[name] = r));

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'verify-py-'));
    config = loadConfig(
      {
        AGENTICFIX_HOME: path.join(root, 'home'),
        AGENTICFIX_RUNS_DIR: path.join(root, 'runs'),
        AGENTICFIX_FLAKY_RERUNS: '1',
      },
      root,
    );
    repo = await fixtureRepo(root, 'verify-py');
  });
  afterAll(async () => {
    for (const [name, r] of Object.entries(reports)) console.log(`${name}: ${r.verdict} — ${r.reason}`);
    await rm(root, { recursive: true, force: true });
  });

  test('a real fix with a new test is verified, in an image rebuilt without cache', async () => {
    const r = await run(
      'verified',
      await makePatch(repo, { 'calc.py': FIXED_CALC, 'tests/test_divide_zero.py': NEW_TEST }),
      'always',
    );
    expect(VerificationReportSchema.parse(r)).toEqual(r);
    expect(r.verdict).toBe('verified');
    expect(r.base_commit).toBe(repo.sha);
    expect(r.image).toMatchObject({ no_cache: true, reused: false });
    expect(r.phases!.build_ms).toBeGreaterThanOrEqual(r.image!.build_ms);
    expect(r.phases!.cells_ms).toBeGreaterThan(0);
    expect(r.image!.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(r.per_test).toBe(true);
    expect(r.patch.test_files).toEqual(['tests/test_divide_zero.py']);
    expect(r.patch.source_files).toEqual(['calc.py']);
    expect(r.evidence.reproduced).toEqual(['tests/test_divide_zero.py::test_divide_by_zero']);
    expect(r.evidence.regressions).toEqual([]);
    expect(r.evidence.fail_both).toEqual(['tests/test_calc.py::test_float_sum']);
    const byName = Object.fromEntries(r.cells.map((c) => [c.name, c]));
    expect(byName.base!.counts).toEqual({ passed: 2, failed: 1, errors: 0, skipped: 0 });
    expect(byName.patch_tests!.counts).toEqual({ passed: 2, failed: 2, errors: 0, skipped: 0 });
    expect(byName.patched!.counts).toEqual({ passed: 3, failed: 1, errors: 0, skipped: 0 });
    expect(byName.base!.runs).toBe(2); // failures are re-run once to tell flaky tests apart
    expect(byName.base!.report_source).toBe('junit-xml');
    expect(r.flags).toEqual([]);
    const md = renderMarkdown(r);
    expect(md).toContain('`verified`');
    expect(md).toContain('| patched | patched | patch | 3 | 1 | 0 | 0 | 1 | 2 |');
    expect(md).toContain(r.image!.id);
    // The judge always leaves its report with the run.
    const saved = JSON.parse(await readFile(path.join(config.runsDir, 't-verified', 'report.json'), 'utf8'));
    expect(saved.verdict).toBe('verified');
    expect(await readFile(path.join(config.runsDir, 't-verified', 'report.md'), 'utf8')).toBe(md);
    // The image rebuilt for this verdict alone is gone with its lease (issue 9: ~300 MB per run).
    await expect(docker.getImage(r.image!.tag!).inspect()).rejects.toThrow(/no such image/i);
    await expect(docker.getImage(r.image!.id).inspect()).rejects.toThrow(/no such image/i);
    expect(await leasesOf('t-verified')).toEqual([]);
  });

  test('a fix without a test is no_reproduction', async () => {
    const r = await run('no_reproduction', await makePatch(repo, { 'calc.py': FIXED_CALC }));
    expect(r.verdict).toBe('no_reproduction');
    expect(r.evidence.regressions).toEqual([]);
    expect(r.image!.no_cache).toBe(false);
    // The same environment judged again is reused by its content key: no build runs.
    const again = await run('no_reproduction_again', await makePatch(repo, { 'calc.py': FIXED_CALC }));
    expect(again.image).toMatchObject({ id: r.image!.id, no_cache: false, reused: true });
    expect(renderMarkdown(again)).toContain('reused (same content key)');
    // A reused (shared) image is only released, never removed by the judge.
    expect(await leasesOf('t-no_reproduction')).toEqual([]);
    await expect(docker.getImage(r.image!.id).inspect()).resolves.toMatchObject({ Id: r.image!.id });
  });

  test('a patch that breaks another test is a regression', async () => {
    const broken = FIXED_CALC.replace('return a + b', 'return a - b');
    const r = await run(
      'regression',
      await makePatch(repo, { 'calc.py': broken, 'tests/test_divide_zero.py': NEW_TEST }),
    );
    expect(r.verdict).toBe('regression');
    expect(r.evidence.regressions).toEqual(['tests/test_calc.py::test_add']);
    expect(r.evidence.reproduced).toEqual(['tests/test_divide_zero.py::test_divide_by_zero']);
  });

  test('a patch that relaxes an existing assertion is tests_modified', async () => {
    const base = await readFile(path.join(repo.dir, 'tests/test_calc.py'), 'utf8');
    const relaxed = base.replace('assert add(0.1, 0.2) == 0.3', 'assert abs(add(0.1, 0.2) - 0.3) < 1');
    const r = await run(
      'tests_modified',
      await makePatch(repo, {
        'calc.py': FIXED_CALC,
        'tests/test_calc.py':
          relaxed +
          `\n\n${NEW_TEST.replace('import pytest\n\nfrom calc import divide\n', 'import pytest\n')}`,
      }),
    );
    expect(r.verdict).toBe('tests_modified');
    expect(r.tests_modified.join('\n')).toMatch(/removed or rewritten in tests\/test_calc\.py/);
    expect(r.tests_modified.join('\n')).toMatch(
      /existing test tests\/test_calc\.py::test_float_sum went from failed to passed/,
    );
  });

  test('a patch that swallows the exception is flagged (the flag alone does not decide the verdict)', async () => {
    const swallowing = FIXED_CALC.replace(
      '    if b == 0:\n        raise ValueError("division by zero")\n    return a / b',
      '    try:\n        return a / b\n    except Exception:\n        pass',
    );
    const test =
      'from calc import divide\n\n\ndef test_divide_by_zero_returns_none():\n    assert divide(1, 0) is None\n';
    const r = await run(
      'swallowed',
      await makePatch(repo, { 'calc.py': swallowing, 'tests/test_none.py': test }),
    );
    expect(r.flags).toEqual([
      expect.stringMatching(/^swallowed_exception: calc\.py:\d+ `except Exception:`/),
    ]);
    expect(r.verdict).toBe('verified');
    expect(renderMarkdown(r)).toContain('swallowed_exception');
  });

  test('a patch that does not apply is patch_does_not_apply', async () => {
    const patch = (await makePatch(repo, { 'calc.py': FIXED_CALC })).replace(
      / {4}return a \/ b/g,
      '    return a // b',
    );
    const r = await run('does_not_apply', patch);
    expect(r.verdict).toBe('patch_does_not_apply');
    expect(r.reason).toMatch(/calc\.py/);
    expect(r.image).toBeNull();
  });

  test('a conftest printing fake PASSED lines while exiting non-zero is invalid_test_run', async () => {
    // Disables the junit report, lets the tests run, then reports every test as PASSED and exits 1.
    const conftest = [
      'import os',
      'import sys',
      '',
      'import pytest',
      '',
      '',
      '@pytest.hookimpl(tryfirst=True)',
      'def pytest_configure(config):',
      '    config.option.xmlpath = None',
      '',
      '',
      'def pytest_sessionfinish(session, exitstatus):',
      '    for item in session.items:',
      '        print(f"PASSED {item.nodeid}")',
      '    sys.stdout.flush()',
      '    os._exit(1)',
      '',
    ].join('\n');
    const r = await run(
      'invalid',
      await makePatch(repo, { 'calc.py': FIXED_CALC, 'tests/conftest.py': conftest }),
    );
    expect(r.verdict).toBe('invalid_test_run');
    expect(r.reason).toMatch(/exit code 1 but no failed test in the pytest-rA report/);
  });

  test('task mode: resolved with the gold patch, unresolved with an empty or a wrong patch', async () => {
    const testPatch = await makePatch(repo, { 'tests/test_divide_zero.py': NEW_TEST });
    const gold = await makePatch(repo, { 'calc.py': FIXED_CALC });
    const tasksFile = path.join(root, 'tasks.jsonl');
    const task = {
      instance_id: 'calc__calc-1',
      repo: path.relative(root, repo.dir),
      base_commit: repo.sha,
      problem_statement: 'divide(1, 0) should raise ValueError',
      test_patch: testPatch,
      patch: gold,
      FAIL_TO_PASS: JSON.stringify(['tests/test_divide_zero.py::test_divide_by_zero']),
      PASS_TO_PASS: ['tests/test_calc.py::test_add', 'tests/test_calc.py::test_divide'],
      test_command: PY_TEST.join(' '),
      dockerfile: repo.dockerfile,
    };
    await writeFile(tasksFile, `${JSON.stringify(task)}\n\n`);
    const [loaded] = await loadTasks(tasksFile);
    expect(loaded!.repo).toBe(repo.dir);
    expect(loaded!.FAIL_TO_PASS).toEqual(['tests/test_divide_zero.py::test_divide_by_zero']);

    const out = (name: string) => ({ ...compose(config), outDir: path.join(root, 'eval', name) });
    const resolved = await gradeInstance(loaded!, gold, config, out('gold'));
    expect(resolved.verdict).toBe('verified');
    expect(resolved.task).toMatchObject({
      resolved: true,
      FAIL_TO_PASS: { failure: [] },
      PASS_TO_PASS: { failure: [] },
    });
    const written = JSON.parse(await readFile(path.join(root, 'eval', 'gold', 'report.json'), 'utf8'));
    expect(written.task.resolved).toBe(true);

    const empty = await gradeInstance(loaded!, '', config, out('empty'));
    expect(empty.verdict).toBe('empty_patch');
    expect(empty.task!.resolved).toBe(false);

    // A "fix" that touches the test file too: the grader resets it before applying the test patch.
    const cheat = await makePatch(repo, {
      'README.md': 'nothing fixed\n',
      'tests/test_divide_zero.py': 'def test_divide_by_zero():\n    pass\n',
    });
    const wrong = await gradeInstance(loaded!, cheat, config, out('wrong'));
    expect(wrong.verdict).toBe('no_reproduction');
    expect(wrong.task).toMatchObject({
      resolved: false,
      FAIL_TO_PASS: { failure: ['tests/test_divide_zero.py::test_divide_by_zero'] },
    });

    expect(summarize([resolved, empty, wrong])).toEqual({
      total_instances: 3,
      completed_instances: 2,
      resolved_instances: 1,
      unresolved_instances: 1,
      empty_patch_instances: 1,
      error_instances: 0,
      resolved_ids: ['calc__calc-1'],
      unresolved_ids: ['calc__calc-1'],
      empty_patch_ids: ['calc__calc-1'],
      error_ids: [],
    });
  });
});

const FIXED_SLUG = `'use strict';

/** Lower-case words joined by dashes. */
function slugify(text) {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
}

function words(text) {
  return text.split(/\\s+/).filter(Boolean).length;
}

module.exports = { slugify, words };
`;
const TRIM_TEST = `'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { slugify } = require('../slug.js');

test('slugify trims surrounding separators', () => {
  assert.strictEqual(slugify('  Hello World! '), 'hello-world');
});
`;

describeDocker("judge on a JavaScript fixture with node's test runner (real git, real Docker)", () => {
  let root: string;
  let config: Config;
  let repo: Repo;
  const run = (patch: string, runId: string) =>
    judge({
      ...compose(config),
      config,
      remote: repo.dir,
      baseCommit: repo.sha,
      patch,
      dockerfile: repo.dockerfile,
      testArgv: ['node', '--test', 'test/'],
      runId,
    });

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'verify-js-'));
    config = loadConfig(
      {
        AGENTICFIX_HOME: path.join(root, 'home'),
        AGENTICFIX_RUNS_DIR: path.join(root, 'runs'),
        AGENTICFIX_FLAKY_RERUNS: '1',
      },
      root,
    );
    repo = await fixtureRepo(root, 'verify-js');
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  test('a real fix with a new test is verified; breaking another test is a regression', async () => {
    const r = await run(
      await makePatch(repo, { 'slug.js': FIXED_SLUG, 'test/trim.test.js': TRIM_TEST }),
      'js-verified',
    );
    expect({ verdict: r.verdict, reason: r.reason }).toMatchObject({ verdict: 'verified' });
    expect(r.cells.map((c) => [c.name, c.report_source])).toEqual([
      ['base', 'tap'],
      ['patched_source', 'tap'],
      ['patch_tests', 'tap'],
      ['patched', 'tap'],
    ]);
    expect(r.evidence.reproduced).toEqual([expect.stringMatching(/slugify trims surrounding separators$/)]);

    const broken = FIXED_SLUG.replace('.filter(Boolean).length', '.filter(Boolean).length - 1');
    const reg = await run(
      await makePatch(repo, { 'slug.js': broken, 'test/trim.test.js': TRIM_TEST }),
      'js-regression',
    );
    expect({ verdict: reg.verdict, reason: reg.reason }).toMatchObject({ verdict: 'regression' });
    expect(reg.evidence.regressions).toEqual([expect.stringMatching(/words counts words$/)]);
  });

  test('without a measured suite the base cell measures it; a cell that times out at the derived limit runs once more alone, at the ceiling', async () => {
    // Load simulated deterministically: the new test is slow on its first run in a worktree only (a marker
    // it leaves there), as a suite is when other cells and jobs share the CPUs.
    const slowOnce = [
      "const test = require('node:test');",
      "const fs = require('node:fs');",
      "const marker = require('node:path').join(__dirname, '..', '.slow-once');",
      "test('slow on its first run', async () => {",
      '  if (fs.existsSync(marker)) return;',
      "  fs.writeFileSync(marker, '');",
      '  await new Promise((r) => setTimeout(r, 600_000));',
      '});',
      '',
    ].join('\n');
    const r = await judge({
      ...compose(config),
      config: { ...config, limits: { ...config.limits, minTestTimeoutMs: 2_000, maxTestTimeoutMs: 300_000 } },
      remote: repo.dir,
      baseCommit: repo.sha,
      patch: await makePatch(repo, {
        'slug.js': FIXED_SLUG,
        'test/trim.test.js': TRIM_TEST,
        'test/slow.test.js': slowOnce,
      }),
      dockerfile: repo.dockerfile,
      testArgv: ['node', '--test', 'test/'],
      runId: 'js-slow-once',
    });
    const base = r.cells.find((c) => c.name === 'base')!;
    expect(base.status).not.toBe('timeout');
    // 5 × the measured base run within the floor and the ceiling: far below the 300 s ceiling.
    expect(r.phases!.cell_limit_s).toBeLessThan(100);
    expect(r.phases!.cell_limit_s).toBeGreaterThanOrEqual(2);
    // It was invalid_test_run ("timed out after N s") for a correct fix.
    const limit = r.phases!.cell_limit_s;
    // The patch's new test reproduces: it fails on the base source (patch_tests) and passes with the fix.
    for (const [name, status] of [
      ['patch_tests', 'failed'],
      ['patched', 'passed'],
    ]) {
      const cell = r.cells.find((c) => c.name === name)!;
      expect({ name, status: cell.status, problem: cell.problem, retimed: cell.retimed }).toEqual({
        name,
        status,
        problem: null,
        retimed: `timed out at the derived ${limit} s limit (${r.phases!.cells_at_once} cell(s) at once); re-run alone at the 300 s ceiling: ${status}`,
      });
    }
    expect(r.verdict).toBe('verified');
    expect(r.reason).toContain(`(patched timed out at the derived ${limit} s limit`);
  });
});
