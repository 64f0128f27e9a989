import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseGoTestJson } from '../../../src/testrunners/reports/gotest.js';
import { parseJestJson } from '../../../src/testrunners/reports/jest.js';
import { parseJunitXml } from '../../../src/testrunners/reports/junit.js';
import { parseMochaJson } from '../../../src/testrunners/reports/mocha.js';
import { parsePytestSummary } from '../../../src/testrunners/reports/pytest.js';
import {
  collectResults,
  crossCheck,
  detectRunner,
  instrumentArgv,
} from '../../../src/testrunners/reports/runner.js';
import { parseTap } from '../../../src/testrunners/reports/tap.js';

// Samples written by the real tools (pytest 9, jest 29, node 20), paths rewritten to /workspace;
// mocha and go samples follow those tools' documented formats.
const DIR = path.join(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'),
  'fixtures',
  'verify-reports',
);
const sample = (name: string) => readFileSync(path.join(DIR, name), 'utf8');
const asMap = (rs: { id: string; status: string }[] | null) =>
  Object.fromEntries((rs ?? []).map((r) => [r.id, r.status]));

/** The pytest run both pytest samples record (junit XML and -rA lines): each test's status. */
const PYTEST_RUN = {
  'tests/test_a.py::test_pass': 'passed',
  'tests/test_a.py::test_fail': 'failed',
  'tests/test_a.py::test_error': 'error',
  'tests/test_a.py::test_skip': 'skipped',
  'tests/test_a.py::test_xfail': 'skipped',
  'tests/test_a.py::TestGroup::test_param[1]': 'passed',
  'tests/test_a.py::TestGroup::test_param[2]': 'failed',
};

describe('per-test report parsers', () => {
  test('pytest junit XML (xunit1) gives real node ids, with errors, skips and xfails', () => {
    expect(asMap(parseJunitXml(sample('pytest.junit.xml'), { pytest: true }))).toEqual(PYTEST_RUN);
  });

  test('a pytest collection error is an error for the module', () => {
    expect(parseJunitXml(sample('pytest-collection-error.junit.xml'), { pytest: true })).toEqual([
      { id: 'tests/test_broken.py', status: 'error' },
    ]);
  });

  test('pytest -rA summary lines', () => {
    // -rA names a skip by its file and line.
    const { 'tests/test_a.py::test_skip': _, ...named } = PYTEST_RUN;
    expect(asMap(parsePytestSummary(sample('pytest-rA.txt')))).toEqual({
      ...named,
      'tests/test_a.py:16': 'skipped',
    });
    expect(parsePytestSummary('PASSED tests/t.py::test_x[a b] - note\n')).toEqual([
      { id: 'tests/t.py::test_x[a b]', status: 'passed' },
    ]);
  });

  test('jest --json, with a suite that failed to run', () => {
    expect(asMap(parseJestJson(sample('jest.json')))).toEqual({
      '__tests__/calc.test.js > calc > adds': 'passed',
      '__tests__/calc.test.js > calc > breaks': 'failed',
      '__tests__/calc.test.js > calc > skipped': 'skipped',
      '__tests__/calc.test.js > calc > later': 'skipped',
      '__tests__/syntax.test.js': 'error',
    });
    expect(parseJestJson('not json')).toBeNull();
    expect(parseJestJson('{"foo": 1}')).toBeNull();
  });

  test("node's test runner TAP: leaves only, suites nest, a crashed file is an error", () => {
    expect(asMap(parseTap(sample('node20.tap')))).toEqual({
      adds: 'passed',
      breaks: 'failed',
      skipped: 'skipped',
      todo: 'skipped',
      'group > inner ok': 'passed',
      'group > inner bad': 'failed',
      'test/syntax.test.js': 'error',
    });
  });

  test('node 18 TAP nests tests under their file', () => {
    const tap = [
      'TAP version 13',
      '# Subtest: /workspace/test/a.test.js',
      '    # Subtest: adds',
      '    ok 1 - adds',
      '      ---',
      '      duration_ms: 0.5',
      '      ...',
      '    1..1',
      'ok 1 - /workspace/test/a.test.js',
      '  ---',
      '  duration_ms: 40',
      '  ...',
      '1..1',
    ].join('\n');
    expect(parseTap(tap)).toEqual([{ id: 'test/a.test.js > adds', status: 'passed' }]);
  });

  test('mocha json reporter: a failed hook is an error', () => {
    expect(asMap(parseMochaJson(sample('mocha.json')))).toEqual({
      'test/calc.spec.js > calc adds': 'passed',
      'test/calc.spec.js > calc breaks': 'failed',
      'test/calc.spec.js > calc later': 'skipped',
      'test/db.spec.js > db "before each" hook for "opens"': 'error',
    });
  });

  test('go test -json: subtests, skips, and a package that failed to build', () => {
    expect(asMap(parseGoTestJson(sample('go-test.jsonl')))).toEqual({
      'example.com/calc::TestAdd': 'passed',
      'example.com/calc::TestDiv': 'failed',
      'example.com/calc::TestDiv/by_zero': 'failed',
      'example.com/calc::TestLater': 'skipped',
      'example.com/broken': 'error',
    });
    expect(parseGoTestJson('ok  \texample.com/calc\n')).toBeNull();
  });
});

/** What pytest is given to write its report (xunit1 for real node ids) and its -rA lines. */
const PYTEST_FLAGS = [
  '--junitxml=/workspace/.agenticfix-report/pytest.xml',
  '-o',
  'junit_family=xunit1',
  '-rA',
];

describe('runner detection, argv instrumentation and the exit-code cross-check', () => {
  test.each([
    [['pytest', '-q'], 'pytest'],
    [['python3', '-m', 'pytest', 'tests'], 'pytest'],
    [['npx', 'jest', '--ci'], 'jest'],
    [['node', 'node_modules/jest/bin/jest.js'], 'jest'],
    [['./node_modules/.bin/mocha'], 'mocha'],
    [['npx', 'vitest', 'run'], 'vitest'],
    [['node', 'node_modules/vitest/vitest.mjs'], 'vitest'],
    [['node', '--test', 'test/'], 'node-test'],
    [['go', 'test', './...'], 'go'],
    [['npm', 'test'], 'generic'],
    [['make', 'check'], 'generic'],
  ])('%j is %s', (argv, runner) => expect(detectRunner(argv)).toBe(runner));

  test('reporter flags go where each runner reads them', () => {
    expect(instrumentArgv(['python3', '-m', 'pytest', 'tests']).argv).toEqual([
      'python3',
      '-m',
      'pytest',
      'tests',
      ...PYTEST_FLAGS,
    ]);
    expect(instrumentArgv(['node', '--test', 'test/'])).toEqual({
      runner: 'node-test',
      argv: [
        'node',
        '--test',
        '--test-reporter=tap',
        '--test-reporter-destination=/workspace/.agenticfix-report/node.tap',
        'test/',
      ],
      reportFile: '.agenticfix-report/node.tap',
    });
    expect(instrumentArgv(['go', 'test', './...']).argv).toEqual(['go', 'test', '-json', './...']);
    expect(instrumentArgv(['npx', 'jest']).argv).toEqual([
      'npx',
      'jest',
      '--json',
      '--outputFile=/workspace/.agenticfix-report/jest.json',
    ]);
    expect(instrumentArgv(['vitest', 'run', 'test/']).argv).toEqual([
      'vitest',
      'run',
      'test/',
      '--reporter=json',
      '--outputFile=/workspace/.agenticfix-report/vitest.json',
    ]);
    expect(instrumentArgv(['mocha']).argv).toEqual([
      'mocha',
      '--reporter',
      'json',
      '--reporter-option',
      'output=/workspace/.agenticfix-report/mocha.json',
    ]);
    expect(instrumentArgv(['make', 'test'])).toEqual({
      runner: 'generic',
      argv: ['make', 'test'],
      reportFile: null,
    });
  });

  test.each([
    [
      ['npx', 'jest', '--ci', '--json', '--outputFile=/tmp/row.json', 'test/a.test.js'],
      [
        'npx',
        'jest',
        '--ci',
        'test/a.test.js',
        '--json',
        '--outputFile=/workspace/.agenticfix-report/jest.json',
      ],
    ],
    [
      ['jest', '--json', '--outputFile', 'row.json'],
      ['jest', '--json', '--outputFile=/workspace/.agenticfix-report/jest.json'],
    ],
    [
      ['vitest', 'run', '--reporter=verbose', '--reporter=json', '--outputFile=row.json'],
      [
        'vitest',
        'run',
        '--reporter=verbose',
        '--reporter=json',
        '--outputFile=/workspace/.agenticfix-report/vitest.json',
      ],
    ],
    [
      ['vitest', 'run', '--reporter', 'json', '--outputFile.json', 'row.json'],
      ['vitest', 'run', '--reporter=json', '--outputFile=/workspace/.agenticfix-report/vitest.json'],
    ],
    [
      ['mocha', '-R', 'spec', '--reporter-option', 'output=row.json', 'test/'],
      [
        'mocha',
        'test/',
        '--reporter',
        'json',
        '--reporter-option',
        'output=/workspace/.agenticfix-report/mocha.json',
      ],
    ],
    [
      ['pytest', '--junitxml', 'row.xml', '--json-report', '--json-report-file=/row.json', 'tests'],
      ['pytest', 'tests', ...PYTEST_FLAGS],
    ],
    [
      [
        'node',
        '--test',
        '--test-reporter=spec',
        '--test-reporter',
        'junit',
        '--test-reporter-destination=row.xml',
        't/',
      ],
      [
        'node',
        '--test',
        '--test-reporter=tap',
        '--test-reporter-destination=/workspace/.agenticfix-report/node.tap',
        't/',
      ],
    ],
    [
      ['pytest', 'tests', '--', '--junitxml=literal'],
      ['pytest', 'tests', ...PYTEST_FLAGS, '--', '--junitxml=literal'],
    ],
  ])("the command's own report flags %j are replaced, not doubled", (argv, expected) => {
    expect(instrumentArgv(argv).argv).toEqual(expected);
  });

  test('pytest falls back from a missing junit file to -rA lines; a missing jest report collects nothing', () => {
    const fromStdout = collectResults(
      'pytest',
      '=== short test summary info ===\nPASSED t.py::test_a\n',
      null,
    );
    expect(fromStdout).toMatchObject({
      per_test: true,
      source: 'pytest-rA',
      results: [{ id: 't.py::test_a', status: 'passed' }],
    });
    expect(collectResults('jest', '', null)).toMatchObject({ per_test: true, results: [] });
    expect(collectResults('generic', 'anything', null)).toEqual({
      runner: 'generic',
      per_test: false,
      source: 'exit-code',
      results: [],
    });
  });

  test('cross-check: results must agree with the exit code', () => {
    const parsed = (statuses: string[]) => ({
      runner: 'pytest' as const,
      per_test: true,
      source: 'junit-xml',
      results: statuses.map((s, i) => ({ id: `t${i}`, status: s as 'passed' })),
    });
    expect(crossCheck(parsed(['passed', 'failed']), 1)).toEqual({ ok: true, empty: false, problem: null });
    expect(crossCheck(parsed(['passed']), 0).ok).toBe(true);
    expect(crossCheck(parsed(['passed']), 3)).toMatchObject({
      ok: false,
      problem: 'exit code 3 but no failed test in the junit-xml report',
    });
    expect(crossCheck(parsed(['failed']), 0)).toMatchObject({
      ok: false,
      problem: '1 failing tests in the junit-xml report but exit code 0',
    });
    expect(crossCheck(parsed([]), 5)).toMatchObject({ ok: false, empty: true });
    expect(crossCheck(parsed(['passed']), null).ok).toBe(false);
    expect(crossCheck({ runner: 'generic', per_test: false, source: 'exit-code', results: [] }, 2).ok).toBe(
      true,
    );
  });
});
