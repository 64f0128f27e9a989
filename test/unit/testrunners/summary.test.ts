import { parseTestSummary, statusFromExit } from '../../../src/testrunners/summary.js';

describe('parseTestSummary', () => {
  it('reads pytest closing lines', () => {
    const out = [
      '============================= test session starts ==============================',
      'collected 6 items',
      '',
      'test_calc.py ..F.sE                                                      [100%]',
      '=========================== short test summary info ============================',
      'FAILED test_calc.py::test_div - ZeroDivisionError',
      '==== 1 failed, 3 passed, 1 skipped, 1 error, 2 warnings in 0.12s ====',
    ].join('\n');
    expect(parseTestSummary(out, '')).toEqual({
      passed: 3,
      failed: 1,
      errors: 1,
      skipped: 1,
      source: 'pytest',
    });
    expect(parseTestSummary('5 passed in 0.03s\n', '')).toMatchObject({
      passed: 5,
      failed: 0,
      source: 'pytest',
    });
    expect(parseTestSummary('===== 2 errors in 0.40s =====\n', '')).toMatchObject({
      errors: 2,
      source: 'pytest',
    });
    expect(parseTestSummary('============ no tests ran in 0.01s ============\n', '')).toEqual({
      passed: 0,
      failed: 0,
      errors: 0,
      skipped: 0,
      source: 'pytest',
    });
  });

  it('reads jest totals from stderr', () => {
    const err = [
      'FAIL test/a.test.js',
      '  ● adds › fails',
      'Test Suites: 1 failed, 1 passed, 2 total',
      'Tests:       2 failed, 1 skipped, 3 passed, 6 total',
      'Snapshots:   0 total',
      'Time:        0.512 s',
    ].join('\n');
    expect(parseTestSummary('', err)).toEqual({
      passed: 3,
      failed: 2,
      errors: 0,
      skipped: 1,
      source: 'jest',
    });
  });

  it("reads node's test runner (TAP and spec reporters)", () => {
    const tap = [
      'TAP version 13',
      'ok 1 - a',
      'not ok 2 - b',
      '1..5',
      '# tests 5',
      '# suites 0',
      '# pass 3',
      '# fail 2',
      '# cancelled 0',
      '# skipped 0',
      '# todo 0',
      '# duration_ms 41.2',
    ].join('\n');
    expect(parseTestSummary(tap, '')).toEqual({
      passed: 3,
      failed: 2,
      errors: 0,
      skipped: 0,
      source: 'node-test',
    });
    const spec = [
      '✔ a (0.5ms)',
      'ℹ tests 4',
      'ℹ pass 4',
      'ℹ fail 0',
      'ℹ cancelled 0',
      'ℹ skipped 1',
      'ℹ todo 0',
    ].join('\n');
    expect(parseTestSummary(spec, '')).toEqual({
      passed: 4,
      failed: 0,
      errors: 0,
      skipped: 1,
      source: 'node-test',
    });
  });

  it('reads unittest verdicts', () => {
    const failed = [
      '..F.E',
      '======================================================================',
      'FAIL: test_div (test_calc.T)',
      '----------------------------------------------------------------------',
      'Ran 5 tests in 0.002s',
      '',
      'FAILED (failures=1, errors=1)',
    ].join('\n');
    expect(parseTestSummary('', failed)).toEqual({
      passed: 3,
      failed: 1,
      errors: 1,
      skipped: 0,
      source: 'unittest',
    });
    expect(parseTestSummary('', '...s\n----\nRan 4 tests in 0.001s\n\nOK (skipped=1)\n')).toEqual({
      passed: 3,
      failed: 0,
      errors: 0,
      skipped: 1,
      source: 'unittest',
    });
  });

  it('reads go test, verbose and per package', () => {
    const verbose = [
      '=== RUN   TestAdd',
      '--- PASS: TestAdd (0.00s)',
      '=== RUN   TestDiv',
      '    calc_test.go:14: want 2, got 3',
      '--- FAIL: TestDiv (0.00s)',
      '--- SKIP: TestSlow (0.00s)',
      'FAIL',
      'FAIL\texample.com/calc\t0.004s',
    ].join('\n');
    expect(parseTestSummary(verbose, '')).toEqual({
      passed: 1,
      failed: 1,
      errors: 0,
      skipped: 1,
      source: 'go-test',
    });
    const quiet = 'ok  \texample.com/a\t0.010s\nFAIL\texample.com/b\t0.020s\nok  \texample.com/c\t(cached)\n';
    expect(parseTestSummary(quiet, '')).toMatchObject({ passed: 2, failed: 1, source: 'go-test' });
  });

  it('reads mocha', () => {
    const out = [
      '  calc',
      '    ✓ adds',
      '    1) divides',
      '',
      '  3 passing (12ms)',
      '  1 pending',
      '  2 failing',
      '',
    ].join('\n');
    expect(parseTestSummary(out, '')).toEqual({
      passed: 3,
      failed: 2,
      errors: 0,
      skipped: 1,
      source: 'mocha',
    });
  });

  it('falls back to a generic "N passed, N failed" line, and to null', () => {
    expect(parseTestSummary('Results: 7 passed, 1 failed\n', '')).toEqual({
      passed: 7,
      failed: 1,
      errors: 0,
      skipped: 0,
      source: 'generic',
    });
    expect(parseTestSummary('hello\n', 'Segmentation fault\n')).toBeNull();
  });
});

describe('statusFromExit', () => {
  it('maps exit code and timeout to a status', () => {
    expect(statusFromExit(0, false)).toBe('passed');
    expect(statusFromExit(1, false)).toBe('failed');
    expect(statusFromExit(null, true)).toBe('timeout');
    expect(statusFromExit(0, true)).toBe('timeout');
    expect(statusFromExit(null, false)).toBe('error');
  });
});
