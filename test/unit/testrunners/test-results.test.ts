import path from 'node:path';
import { omitPassLines, shapeOutput } from '../../../src/testrunners/failures.js';
import { loadConfig } from '../../../src/config/config.js';
import { runTests } from '../../../src/tools/run-tests.js';
import { argsSchema } from '../../../src/tools/types.js';
import { selectTests } from '../../../src/testrunners/selection.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

const PYTEST = `tests/test_a.py .F.FE                                                    [100%]

==================================== ERRORS ====================================
__________________________ ERROR at setup of test_err __________________________

    @pytest.fixture
    def bad():
>       raise RuntimeError("fixture exploded")
E       RuntimeError: fixture exploded

tests/test_a.py:12: RuntimeError
=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5, "add is broken"
E       AssertionError: add is broken
E       assert -1 == 5
E        +  where -1 = add(2, 3)

tests/test_a.py:5: AssertionError
_______________________________ TestC.test_p[2] ________________________________

self = <test_a.TestC object at 0x1>, x = 2

    @pytest.mark.parametrize("x", [1, 2])
    def test_p(self, x):
>       assert x == 1
E       assert 2 == 1

tests/test_a.py:9: AssertionError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
PASSED tests/test_a.py::TestC::test_p[1]
ERROR tests/test_a.py::test_err - RuntimeError: fixture exploded
FAILED tests/test_a.py::test_add - AssertionError: add is broken
FAILED tests/test_a.py::TestC::test_p[2] - assert 2 == 1
FAILED tests/test_b.py::test_gone - Assertio...
===================== 3 failed, 2 passed, 1 error in 1.25s =====================`;

describe('failing tests from console output', () => {
  it('pytest: ids from the short summary, messages the whole section of each', () => {
    expect(shapeOutput(PYTEST, '').failures).toEqual([
      {
        id: 'tests/test_a.py::test_err',
        message:
          '    @pytest.fixture\n    def bad():\n>       raise RuntimeError("fixture exploded")\n' +
          'E       RuntimeError: fixture exploded\n\ntests/test_a.py:12: RuntimeError',
      },
      {
        id: 'tests/test_a.py::test_add',
        message:
          '    def test_add():\n>       assert add(2, 3) == 5, "add is broken"\nE       AssertionError: add is broken\n' +
          'E       assert -1 == 5\nE        +  where -1 = add(2, 3)\n\ntests/test_a.py:5: AssertionError',
      },
      {
        id: 'tests/test_a.py::TestC::test_p[2]',
        message: expect.stringMatching(
          /^self = <test_a.TestC object at 0x1>, x = 2\n[^]*\nE {7}assert 2 == 1\n/,
        ),
      },
      // No section (e.g. --tb=no): the summary's own message.
      { id: 'tests/test_b.py::test_gone', message: 'Assertio...' },
    ]);
  });

  it('node --test: the spec reporter (failures listed twice, once here) and TAP', () => {
    const spec =
      '✖ adds (7.29ms)\n  AssertionError [ERR_ASSERTION]: 2 == 3\n      at TestContext.<anonymous> (file:///a.mjs:3:27)\n' +
      '✔ zero (0.31ms)\nℹ tests 2\n\n✖ failing tests:\n\ntest at a.test.mjs:3:1\n✖ adds (7.29ms)\n  AssertionError [ERR_ASSERTION]: 2 == 3\n';
    expect(shapeOutput(spec, '').failures).toEqual([
      {
        id: 'adds',
        message:
          'AssertionError [ERR_ASSERTION]: 2 == 3\n    at TestContext.<anonymous> (file:///a.mjs:3:27)',
      },
    ]);
    const tap =
      "TAP version 13\n# Subtest: adds\nnot ok 1 - adds\n  ---\n  duration_ms: 2.03\n  location: '/a.mjs:3:1'\n" +
      "  failureType: 'testCodeFailure'\n  error: '2 == 3'\n  code: 'ERR_ASSERTION'\n  ...\nok 2 - zero\n";
    expect(shapeOutput(tap, '').failures).toEqual([
      {
        id: 'adds',
        message:
          "duration_ms: 2.03\nlocation: '/a.mjs:3:1'\nfailureType: 'testCodeFailure'\nerror: '2 == 3'\n" +
          "code: 'ERR_ASSERTION'",
      },
    ]);
  });

  it('go test, jest and mocha', () => {
    const go =
      '=== RUN   TestAdd\n    calc_test.go:9: add(1, 2) = -1, want 3\n--- FAIL: TestAdd (0.00s)\n    calc_test.go:9: add(1, 2) = -1, want 3\nFAIL\nFAIL\tcalc\t0.01s\n';
    expect(shapeOutput(go, '').failures).toEqual([
      { id: 'TestAdd', message: 'calc_test.go:9: add(1, 2) = -1, want 3' },
    ]);
    const jest =
      ' FAIL  test/calc.test.js\n  ● calc › adds\n\n    expect(received).toBe(expected)\n\n    Expected: 3\n    Received: -1\n\n      at Object.<anonymous> (test/calc.test.js:4:20)\n\nTests:       1 failed, 1 passed, 2 total\n';
    expect(shapeOutput(jest, '').failures).toEqual([
      {
        id: 'calc › adds',
        message:
          'expect(received).toBe(expected)\n\nExpected: 3\nReceived: -1\n\n  at Object.<anonymous> (test/calc.test.js:4:20)',
      },
    ]);
    const mocha =
      '  calc\n    ✔ zero\n    1) adds\n\n\n  1 passing (5ms)\n  1 failing\n\n  1) calc\n       adds:\n\n      AssertionError [ERR_ASSERTION]: -1 == 3\n      + expected - actual\n\n      at Context.<anonymous> (test/calc.test.js:6:12)\n';
    expect(shapeOutput(mocha, '').failures).toEqual([
      {
        id: 'calc adds',
        message:
          'AssertionError [ERR_ASSERTION]: -1 == 3\n+ expected - actual\n\nat Context.<anonymous> (test/calc.test.js:6:12)',
      },
    ]);
  });

  it('pass lines are left out, counted, and nothing else is', () => {
    const out = omitPassLines(PYTEST);
    expect(out.omitted).toBe(2);
    expect(out.text).toContain('[... 2 passing-test lines left out ...]\nERROR tests/test_a.py::test_err');
    expect(out.text).not.toContain('PASSED');
    const verbose = 'tests/a.py::test_1 PASSED  [ 50%]\ntests/a.py::test_2 FAILED  [100%]';
    expect(omitPassLines(verbose).text).toBe(
      '[... 1 passing-test lines left out ...]\ntests/a.py::test_2 FAILED  [100%]',
    );
    expect(omitPassLines('no pass lines\n')).toEqual({ text: 'no pass lines\n', omitted: 0 });
  });

  it('a passing TAP test goes whole (header, ok line, YAML block); a failing one and nested headers stay', () => {
    const tap = [
      'TAP version 13',
      '# Subtest: adds',
      'ok 1 - adds',
      '  ---',
      '  duration_ms: 0.9',
      '  ...',
      '# Subtest: group',
      '    # Subtest: divides',
      '    not ok 1 - divides',
      '      ---',
      "      error: 'Expected values to be strictly equal'",
      '      ...',
      '    # Subtest: rounds',
      '    ok 2 - rounds',
      '      ---',
      '      duration_ms: 0.1',
      '      ...',
      'not ok 2 - group',
      '1..2',
      '# pass 2',
    ].join('\n');
    const out = omitPassLines(tap);
    expect(out.text.split('\n')).toEqual([
      'TAP version 13',
      '[... 5 passing-test lines left out ...]',
      '# Subtest: group',
      '    # Subtest: divides',
      '    not ok 1 - divides',
      '      ---',
      "      error: 'Expected values to be strictly equal'",
      '      ...',
      '[... 5 passing-test lines left out ...]',
      'not ok 2 - group',
      '1..2',
      '# pass 2',
    ]);
    expect(out.omitted).toBe(10);
  });
});

describe('test selection', () => {
  let wt: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const t = await tempDir('select-');
    cleanup = t.cleanup;
    wt = (await makeSourceRepo(path.join(t.dir, 'repo'), { 'tests/test_a.py': '', 'pytest.ini': '' })).path;
  });
  afterAll(() => cleanup());
  const select = (argv: string[], tests: string[]) => selectTests(argv, tests, wt);

  it('pytest: ids and files replace the command paths (not option values); names become -k', () => {
    expect(
      select(['python3', '-m', 'pytest', '-q', '-c', 'pytest.ini', 'tests'], ['tests/test_a.py::test_x[1]']),
    ).toEqual({
      ok: true,
      argv: ['python3', '-m', 'pytest', '-q', '-c', 'pytest.ini', 'tests/test_a.py::test_x[1]'],
    });
    expect(select(['pytest', 'tests'], ['test_add', 'test_sub'])).toEqual({
      ok: true,
      argv: ['pytest', 'tests', '-k', 'test_add or test_sub'],
    });
  });

  it('jest, vitest, mocha, node --test and go', () => {
    expect(select(['npx', 'jest', 'tests'], ['tests/a.test.js', 'adds'])).toEqual({
      ok: true,
      argv: ['npx', 'jest', '-t', 'adds', 'tests/a.test.js'],
    });
    expect(select(['npx', 'vitest', 'run'], ['adds.one'])).toMatchObject({
      argv: ['npx', 'vitest', 'run', '-t', 'adds\\.one'],
    });
    expect(select(['mocha', 'tests'], ['adds', 'subtracts'])).toMatchObject({
      argv: ['mocha', 'tests', '--grep', 'adds|subtracts'],
    });
    expect(select(['node', '--test', 'tests'], ['tests/test_a.py', 'adds'])).toMatchObject({
      argv: ['node', '--test', '--test-name-pattern=adds', 'tests/test_a.py'],
    });
    expect(select(['go', 'test', '-count', '1', './...'], ['TestAdd', './calc'])).toMatchObject({
      argv: ['go', 'test', '-run', '^(TestAdd)$', '-count', '1', './calc'],
    });
  });

  it('refuses a command that is no known runner', () => {
    const r = select(['npm', 'test'], ['adds']);
    expect(r).toMatchObject({ ok: false });
    expect(!r.ok && r.error).toMatch(/not a runner whose tests can be selected/);
  });

  const args = argsSchema(runTests, loadConfig({}).limits);

  it.each([
    ['-x'],
    ['--co'],
    ['a;rm -rf /'],
    ['$(id)'],
    ['`id`'],
    ['a|b'],
    ['a\nb'],
    [' a'],
    ['a>b'],
    ["a'b"],
  ])('rejects the selector %j', (bad) => {
    expect(args.safeParse({ tests: [bad] }).success).toBe(false);
  });

  it('accepts ids, paths and names; the arguments stay strict', () => {
    expect(
      args.safeParse({ tests: ['tests/test_a.py::TestC::test_p[2-x]', './pkg/...', 'adds'] }).success,
    ).toBe(true);
    expect(args.safeParse({ tests: [] }).success).toBe(false);
    expect(args.safeParse({ tests: ['a'], shell: 'x' }).success).toBe(false);
  });
});
