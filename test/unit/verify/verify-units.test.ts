import type { Config } from '../../../src/config/config.js';
import { flakyIds } from '../../../src/verify/cells.js';
import { splitArgv } from '../../../src/verify/argv.js';
import { evaluate } from '../../../src/verify/evaluate.js';
import { cellConcurrency, inPool } from '../../../src/verify/judge.js';
import { MARKDOWN_LIMIT, renderMarkdown } from '../../../src/verify/markdown.js';
import { formatFlag, scanPatch, staticTestModifications } from '../../../src/verify/scan.js';
import { classifyPatch, globTest, isTestPath, joinPatch, splitPatch } from '../../../src/verify/split.js';
import type { Cell, CellName, VerificationReport } from '../../../src/verify/types.js';
import type { TestStatus } from '../../../src/testrunners/reports/types.js';

const section = (file: string, body: string, header = '') =>
  `diff --git a/${file} b/${file}\n${header}--- a/${file}\n+++ b/${file}\n${body}`;

describe('test-path rules', () => {
  test.each([
    ['tests/test_calc.py', true],
    ['pkg/test_util.py', true],
    ['pkg/util_test.py', true],
    ['conftest.py', true],
    ['src/__tests__/a.js', true],
    ['src/a.test.ts', true],
    ['src/a.spec.mjs', true],
    ['test/helpers.js', true],
    ['internal/calc_test.go', true],
    ['internal/testdata/in.txt', true],
    ['src/testing.py', false],
    ['calc.py', false],
    ['src/contest.js', false],
    ['latest/a.js', false],
  ])('%s → %s', (p, expected) => expect(isTestPath(p)).toBe(expected));

  test('repository globs add to the rules', () => {
    expect(isTestPath('qa/check_calc.py')).toBe(false);
    expect(isTestPath('qa/check_calc.py', ['qa/**'])).toBe(true);
    expect(isTestPath('deep/x/check_calc.py', ['check_*.py'])).toBe(true);
    expect(globTest('src/**/*.it.js', 'src/a/b/c.it.js')).toBe(true);
    expect(globTest('src/*.it.js', 'src/a/c.it.js')).toBe(false);
  });

  test('a patch splits into test and source sections that re-join exactly', () => {
    const patch =
      section('calc.py', '@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n') +
      section(
        'tests/test_new.py',
        '@@ -0,0 +1,2 @@\n+def test_f():\n+    assert True\n',
        'new file mode 100644\n',
      )
        .replace('--- a/tests', '--- /dev/null\n+++ DROP')
        .replace(/\+\+\+ DROP\/test_new\.py\n\+\+\+/, '+++');
    const sections = splitPatch(patch);
    expect(sections.map((s) => [s.path, s.status])).toEqual([
      ['calc.py', 'modified'],
      ['tests/test_new.py', 'added'],
    ]);
    expect(joinPatch(sections)).toBe(patch);
    const { tests, sources } = classifyPatch(patch);
    expect(tests.map((s) => s.path)).toEqual(['tests/test_new.py']);
    expect(sources.map((s) => s.path)).toEqual(['calc.py']);
    expect(sections[0]!.lines).toEqual([
      { kind: ' ', text: 'def f():', line: 1, hunk: 0 },
      { kind: '-', text: '    return 1', line: 2, hunk: 0 },
      { kind: '+', text: '    return 2', line: 2, hunk: 0 },
    ]);
  });
});

describe('suspicious-patch scan', () => {
  const flagsOf = (patch: string) => scanPatch(splitPatch(patch)).map(formatFlag);

  test('swallowed exceptions in Python and JavaScript', () => {
    expect(
      flagsOf(section('a.py', '@@ -1,2 +1,4 @@\n try:\n     run()\n+except Exception:\n+    pass\n')),
    ).toEqual(['swallowed_exception: a.py:3 `except Exception:`']);
    expect(flagsOf(section('a.py', '@@ -1 +1 @@\n-x = f()\n+try: x = f()\n+except: pass\n'))).toEqual([
      'swallowed_exception: a.py:2 `except: pass`',
    ]);
    expect(
      flagsOf(
        section('a.js', '@@ -1 +1,3 @@\n-run();\n+try { run(); } catch (e) {}\n+load().catch(() => {});\n'),
      ),
    ).toHaveLength(2);
    expect(flagsOf(section('a.ts', '@@ -1 +1,4 @@\n-run();\n+try {\n+  run();\n+} catch {\n+}\n'))).toEqual([
      'swallowed_exception: a.ts:3 `} catch {`',
    ]);
  });

  test('specific handlers that do something are not flagged', () => {
    expect(
      flagsOf(
        section('a.py', '@@ -1 +1,4 @@\n-x = f()\n+try:\n+    x = f()\n+except KeyError:\n+    pass\n'),
      ),
    ).toEqual([]);
    expect(
      flagsOf(
        section(
          'a.py',
          '@@ -1 +1,4 @@\n-x = f()\n+try:\n+    x = f()\n+except Exception:\n+    log.exception("f failed")\n+    raise\n',
        ),
      ),
    ).toEqual([]);
    expect(
      flagsOf(section('a.js', '@@ -1 +1 @@\n-run();\n+try { run(); } catch (e) { report(e); }\n')),
    ).toEqual([]);
  });

  test('skip markers and CI or runner configuration', () => {
    const patch =
      section('tests/test_a.py', '@@ -1 +1,2 @@\n+@pytest.mark.skip(reason="flaky")\n def test_a():\n') +
      section('test/a.test.js', "@@ -1 +1 @@\n-it('works', () => {});\n+it.skip('works', () => {});\n") +
      section('.github/workflows/ci.yml', '@@ -1 +1 @@\n-run: npm test\n+run: true\n') +
      section('pytest.ini', '@@ -1 +1,2 @@\n [pytest]\n+addopts = --deselect tests/test_a.py::test_a\n');
    expect(flagsOf(patch)).toEqual([
      'skip_marker: tests/test_a.py:1 `@pytest.mark.skip(reason="flaky")`',
      "skip_marker: test/a.test.js:1 `it.skip('works', () => {});`",
      'ci_config_changed: .github/workflows/ci.yml',
      'test_config_changed: pytest.ini',
      'skip_marker: pytest.ini:2 `addopts = --deselect tests/test_a.py::test_a`',
    ]);
  });

  test('edits to existing tests are modifications; purely additive edits and new files are not', () => {
    const { tests } = classifyPatch(
      section('tests/test_a.py', '@@ -1,2 +1,2 @@\n def test_a():\n-    assert f() == 3\n+    assert f()\n') +
        section('tests/test_b.py', '@@ -2 +2,4 @@\n     pass\n+\n+def test_new():\n+    assert g()\n') +
        section('tests/test_c.py', '@@ -1 +1,2 @@\n+@pytest.mark.xfail\n def test_c():\n') +
        'diff --git a/tests/test_d.py b/tests/test_d.py\ndeleted file mode 100644\n--- a/tests/test_d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-def test_d(): pass\n',
    );
    expect(staticTestModifications(tests)).toEqual([
      '1 existing line(s) removed or rewritten in tests/test_a.py (first at line 2)',
      'skip marker added to tests/test_c.py:1',
      'deleted test file tests/test_d.py',
    ]);
  });
});

type Statuses = Record<string, TestStatus>;
const mkCell = (name: CellName, statuses: Statuses, extra: Partial<Cell> = {}): Cell => {
  const results = Object.entries(statuses).map(([id, status]) => ({ id, status }));
  const failing = results.some((r) => r.status === 'failed' || r.status === 'error');
  return {
    name,
    source: name === 'base' || name === 'patch_tests' ? 'base' : 'patched',
    tests: name === 'base' || name === 'patched_source' ? 'base' : 'patch',
    argv: ['pytest'],
    exit_code: failing ? 1 : 0,
    status: failing ? 'failed' : 'passed',
    runs: 1,
    duration_ms: 10,
    runner: 'pytest',
    per_test: true,
    report_source: 'junit-xml',
    counts: { passed: 0, failed: 0, errors: 0, skipped: 0 },
    results,
    flaky: [],
    problem: null,
    output_tail: '',
    ...extra,
  };
};
const cells = (
  a: Statuses,
  b: Statuses,
  c: Statuses,
  d: Statuses,
  extra: Partial<Record<CellName, Partial<Cell>>> = {},
) => ({
  base: mkCell('base', a, extra.base),
  patched_source: mkCell('patched_source', b, extra.patched_source),
  patch_tests: mkCell('patch_tests', c, extra.patch_tests),
  patched: mkCell('patched', d, extra.patched),
});

describe('verdicts from the four cells', () => {
  const base = { old: 'passed', broken: 'failed' } as const;

  test('verified: a new test fails on the base and passes with the patch; failing-both is reported, not blamed', () => {
    const j = evaluate(cells(base, base, { ...base, new: 'failed' }, { ...base, new: 'passed' }), [], true);
    expect(j.verdict).toBe('verified');
    expect(j.evidence).toMatchObject({ reproduced: ['new'], regressions: [], fail_both: ['broken'] });
  });

  test('a new test that cannot even be collected on the base still reproduces', () => {
    const j = evaluate(
      cells(base, base, { 'tests/test_new.py': 'error' }, { ...base, new: 'passed' }),
      [],
      true,
    );
    expect(j.verdict).toBe('verified');
  });

  test('regression: a base test that passed fails, errors or vanishes with the patch', () => {
    expect(
      evaluate(
        cells(
          base,
          { broken: 'failed', old: 'failed' },
          { ...base, new: 'failed' },
          { ...base, new: 'passed' },
        ),
        [],
        true,
      ).evidence.regressions,
    ).toEqual(['old']);
    const vanished = evaluate(cells(base, { broken: 'failed' }, base, base), [], true);
    expect(vanished.verdict).toBe('regression');
  });

  test('no_reproduction: no new test, a new test passing on the base, or a new test failing with the patch', () => {
    expect(evaluate(cells(base, base, base, base), [], false).reason).toMatch(
      /no test fails on the base source and passes with the patch/,
    );
    expect(
      evaluate(cells(base, base, { ...base, new: 'passed' }, { ...base, new: 'passed' }), [], true).verdict,
    ).toBe('no_reproduction');
    const j = evaluate(cells(base, base, { ...base, new: 'failed' }, { ...base, new: 'failed' }), [], true);
    expect(j).toMatchObject({ verdict: 'no_reproduction', evidence: { new_tests_failing: ['new'] } });
  });

  test('verified: an untouched base test that fails on the base source passes with the patch', () => {
    const fixed = { ...base, broken: 'passed' as const };
    const j = evaluate(cells(base, fixed, base, fixed), [], false);
    expect(j).toMatchObject({ verdict: 'verified', evidence: { reproduced: ['broken'], regressions: [] } });
  });

  test('tests_modified: an existing test whose result changes with the same source', () => {
    const j = evaluate(
      cells(
        base,
        base,
        { old: 'passed', broken: 'passed', new: 'failed' },
        { old: 'passed', broken: 'passed', new: 'passed' },
      ),
      [],
      true,
    );
    expect(j.verdict).toBe('tests_modified');
    expect(j.tests_modified[0]).toMatch(/existing test broken went from failed to passed on the base source/);
    expect(
      evaluate(
        cells(base, base, { ...base, new: 'failed' }, { ...base, new: 'passed' }),
        ['deleted test file t.py'],
        true,
      ).verdict,
    ).toBe('tests_modified');
  });

  test('flaky tests are excluded from the evidence and listed', () => {
    const j = evaluate(
      cells(
        base,
        { old: 'failed', broken: 'failed' },
        { ...base, new: 'failed' },
        { old: 'failed', broken: 'failed', new: 'passed' },
        {
          patched_source: { flaky: ['old'] },
        },
      ),
      [],
      true,
    );
    expect(j).toMatchObject({ verdict: 'verified', evidence: { flaky: ['old'], regressions: [] } });
    expect(
      flakyIds([
        [
          { id: 'a', status: 'failed' },
          { id: 'b', status: 'failed' },
        ],
        [
          { id: 'a', status: 'passed' },
          { id: 'b', status: 'failed' },
        ],
        [
          { id: 'b', status: 'failed' },
          { id: 'c', status: 'passed' },
        ],
      ]),
    ).toEqual(['a', 'c']);
  });

  test('invalid_test_run wins over everything the results would say', () => {
    const j = evaluate(
      cells(base, base, base, base, {
        patched: { problem: 'exit code 3 but no failed test in the pytest-rA report' },
      }),
      ['x'],
      true,
    );
    expect(j.verdict).toBe('invalid_test_run');
    expect(j.reason).toContain('patched: exit code 3');
  });

  test('exit codes only: per_test false', () => {
    const generic = (exit: number): Partial<Cell> => ({ per_test: false, exit_code: exit, results: [] });
    const j = evaluate(
      cells(
        {},
        {},
        {},
        {},
        { base: generic(1), patched_source: generic(0), patch_tests: generic(1), patched: generic(0) },
      ),
      [],
      true,
    );
    expect(j.verdict).toBe('verified');
    expect(j.reason).toMatch(/exit codes only/);
    const r = evaluate(
      cells(
        {},
        {},
        {},
        {},
        { base: generic(0), patched_source: generic(1), patch_tests: generic(0), patched: generic(1) },
      ),
      [],
      true,
    );
    expect(r.verdict).toBe('regression');
  });
});

describe('markdown evidence report', () => {
  const report = (n: number): VerificationReport => ({
    verdict: 'regression',
    reason: `${n} tests regress.`,
    base_commit: 'a'.repeat(40),
    flags: ['swallowed_exception: calc.py:9 `except Exception:`'],
    mode: 'live',
    run_id: 'r1',
    repo: '/tmp/repo',
    per_test: true,
    patch: { files: ['calc.py'], test_files: [], source_files: ['calc.py'] },
    tests_modified: [],
    image: {
      id: `sha256:${'b'.repeat(64)}`,
      tag: 'agenticfix-env:x',
      no_cache: true,
      reused: false,
      build_ms: 41000,
      dockerfile_sha256: 'c'.repeat(64),
    },
    build_error: null,
    phases: { worktrees_ms: 300, build_ms: 41000, cells_ms: 5000, cells_at_once: 2, cell_limit_s: 60 },
    cells: [mkCell('base', { a: 'passed' })],
    evidence: {
      reproduced: [],
      regressions: Array.from(
        { length: n },
        (_, i) => `tests/test_mod_${i}.py::test_case_with_a_long_name_${'x'.repeat(150)}_${i}`,
      ),
      new_tests_failing: [],
      fail_both: [],
      flaky: [],
    },
    task: null,
    commands: ['docker build --no-cache'],
    duration_ms: 60000,
    started_at: new Date().toISOString(),
  });

  test('tables the cells and cuts long lists inside <details> with a count', () => {
    const md = renderMarkdown(report(15));
    expect(md).toContain('| base | base | base | 0 | 0 | 0 | 0 | 0 | 1 | 0.0 s |');
    expect(md).toContain('### Regressions (15)');
    expect(md).toContain('<details><summary>5 more</summary>');
    expect(md).toContain('swallowed_exception');
    expect(md).toContain('without cache');
  });

  test('stays under the comment limit whatever the number of tests', () => {
    const md = renderMarkdown(report(20_000));
    expect(md.length).toBeLessThanOrEqual(MARKDOWN_LIMIT);
    expect(md).toContain('### Regressions (20000)');
    expect(md).toMatch(/_\d+ more not shown \(see the JSON report\)\._/);
  });
});

test('splitArgv splits words and quotes without a shell', () => {
  expect(splitArgv(`python3 -m pytest -k "not slow" 'a b' c\\ d`)).toEqual([
    'python3',
    '-m',
    'pytest',
    '-k',
    'not slow',
    'a b',
    'c d',
  ]);
  expect(splitArgv('  ')).toEqual([]);
  expect(() => splitArgv('echo "open')).toThrow(/unterminated/);
});

describe('concurrent cells', () => {
  const sandbox = (cpus: number, memoryMb: number) => ({
    sandbox: { nanoCpus: cpus * 1e9, memoryBytes: memoryMb * 2 ** 20 } as Config['sandbox'],
  });
  const GiB = 2 ** 30;

  const make = ['make', 'test'];
  test('as many cells at once as the host holds at the sandbox limits, between 1 and 4', () => {
    expect(cellConcurrency(sandbox(1, 1024), make, { cpus: 2, memory: 24 * GiB })).toBe(2);
    expect(cellConcurrency(sandbox(1, 1024), make, { cpus: 16, memory: 24 * GiB })).toBe(4);
    expect(cellConcurrency(sandbox(0.5, 8192), make, { cpus: 2, memory: 24 * GiB })).toBe(3);
    expect(cellConcurrency(sandbox(4, 1024), make, { cpus: 2, memory: 24 * GiB })).toBe(1);
  });

  test.each([
    // A serial runner keeps one CPU busy whatever the sandbox allows: two cells share a 2-CPU host.
    [['pytest', 'tests'], 2, 2, 2],
    [['pytest', '-n', 'auto'], 2, 2, 1],
    [['pytest', '-n4'], 4, 8, 2],
    [['npx', 'jest', '--maxWorkers=2'], 4, 4, 2],
    [['npx', 'jest', '--maxWorkers=4'], 4, 4, 1],
    [['npx', 'jest', '-w', '50%'], 4, 4, 2],
    [['npx', 'jest', '--runInBand'], 4, 4, 4],
    [['npx', 'jest'], 4, 4, 1],
    [['vitest', 'run', '--no-file-parallelism'], 2, 2, 2],
    [['mocha', 'test/'], 2, 2, 2],
    [['mocha', '--parallel', '--jobs', '2'], 4, 4, 2],
    [['node', '--test', '--test-concurrency=1'], 2, 2, 2],
    [['go', 'test', '-p', '1', './...'], 2, 2, 2],
  ])('%j in a %d-CPU sandbox on a %d-CPU host: %d cells at once', (argv, sandboxCpus, hostCpus, expected) => {
    expect(cellConcurrency(sandbox(sandboxCpus, 1024), argv, { cpus: hostCpus, memory: 24 * GiB })).toBe(
      expected,
    );
  });

  test('the pool never exceeds its limit and keeps going until every item ran', async () => {
    let running = 0;
    let peak = 0;
    const done: number[] = [];
    await inPool([1, 2, 3, 4, 5], 2, async (n) => {
      peak = Math.max(peak, ++running);
      await new Promise((r) => setTimeout(r, 5 * (6 - n)));
      running--;
      done.push(n);
    });
    expect(peak).toBe(2);
    expect(done.sort()).toEqual([1, 2, 3, 4, 5]);
  });

  test('an error waits for the calls already running, starts no new one, and is rethrown', async () => {
    const started: number[] = [];
    let finished = 0;
    const pool = inPool([1, 2, 3, 4], 2, async (n) => {
      started.push(n);
      if (n === 1) throw new Error('isolation');
      await new Promise((r) => setTimeout(r, 20));
      finished++;
    });
    await expect(pool).rejects.toThrow('isolation');
    expect(started).toEqual([1, 2]);
    expect(finished).toBe(1);
  });
});
