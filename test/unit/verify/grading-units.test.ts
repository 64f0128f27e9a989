import { collectResults } from '../../../src/testrunners/reports/runner.js';
import { instrumentShell, needsShell } from '../../../src/testrunners/reports/shell.js';
import { matchTestIds, splitTestId } from '../../../src/verify/test-ids.js';

describe("a row's test ids in each runner's naming", () => {
  // What the judge's jest/vitest parser reports, and mocha 10 (with files) and mocha 6 (no file name).
  const jest = [
    { id: 'test/a.test.js > slugify > nested > drops dashes', status: 'passed' as const },
    { id: 'test/a.test.js > slugify > lower-cases', status: 'failed' as const },
    { id: 'test/b.test.js > slugify > lower-cases', status: 'passed' as const },
  ];
  const mocha6 = [
    { id: 'slugify nested drops dashes', status: 'passed' as const },
    { id: 'slugify lower-cases', status: 'failed' as const },
  ];

  it('finds the same test from every accepted form', () => {
    const forms = [
      'test/a.test.js > slugify > nested > drops dashes', // the judge's
      'test/a.test.js::slugify nested drops dashes', // SWE-bench-style rows
      './test/a.test.js::slugify > nested > drops dashes',
      'slugify nested drops dashes', // jest fullName, vitest/mocha full title
      'slugify > nested > drops dashes',
    ];
    const m = matchTestIds(forms, jest);
    for (const f of forms)
      expect({ f, m: m.get(f) }).toEqual({
        f,
        m: { status: 'passed', id: 'test/a.test.js > slugify > nested > drops dashes' },
      });
    // mocha 6 names no file: the row's file cannot be checked, the title must be unique.
    const m6 = matchTestIds(forms, mocha6);
    for (const f of forms) expect(m6.get(f)).toEqual({ status: 'passed', id: 'slugify nested drops dashes' });
  });

  it('an id the report does not hold, or holds twice without a file, is missing, not failing', () => {
    const m = matchTestIds(
      ['test/a.test.js::slugify gone', 'slugify lower-cases', 'test/b.test.js::slugify lower-cases'],
      jest,
    );
    expect(m.get('test/a.test.js::slugify gone')).toEqual({ status: 'missing', why: 'not in the report' });
    expect(m.get('slugify lower-cases')).toEqual({
      status: 'missing',
      why: '2 tests in the report have this name',
    });
    expect(m.get('test/b.test.js::slugify lower-cases')).toMatchObject({ status: 'passed' });
  });

  it('keeps pytest and go ids intact', () => {
    expect(splitTestId('tests/test_a.py::TestC::test_x[1]')).toEqual({
      file: 'tests/test_a.py',
      title: 'TestC::test_x[1]',
    });
    const m = matchTestIds(
      ['tests/test_a.py::TestC::test_x[1]'],
      [{ id: 'tests/test_a.py::TestC::test_x[1]', status: 'passed' }],
    );
    expect(m.get('tests/test_a.py::TestC::test_x[1]')).toMatchObject({ status: 'passed' });
  });
});

describe("a row's command with shell syntax", () => {
  it('runs through sh -c with the judge flags on the runner, the rest as written', () => {
    expect(needsShell('npx mocha --reporter json > test-results.json')).toBe(true);
    expect(needsShell('TZ=UTC npx jest')).toBe(true);
    expect(needsShell('npx jest "a > b"')).toBe(false);
    expect(needsShell('npx jest test/a.test.js')).toBe(false);
    expect(instrumentShell('npx mocha --reporter json > test-results.json')).toEqual({
      runner: 'mocha',
      argv: [
        'sh',
        '-c',
        'npx mocha --reporter json --reporter-option output=/workspace/.agenticfix-report/mocha.json > test-results.json',
      ],
      reportFile: '.agenticfix-report/mocha.json',
      stdoutFile: 'test-results.json',
    });
    expect(instrumentShell("TZ=UTC npm run build && npx jest --ci 'a b' 2>&1 | tee out.txt")).toMatchObject({
      runner: 'jest',
      argv: [
        'sh',
        '-c',
        "TZ=UTC npm run build && npx jest --ci 'a b' --json --outputFile=/workspace/.agenticfix-report/jest.json 2>&1 | tee out.txt",
      ],
      stdoutFile: null,
    });
    expect(instrumentShell('make test > out.txt')).toMatchObject({ runner: 'generic', reportFile: null });
  });

  it("mocha 6's json on stdout, redirected to a file, is the report", () => {
    const mocha6 = JSON.stringify({
      stats: { tests: 1 },
      passes: [{ title: 'lower-cases', fullTitle: 'slugify lower-cases' }],
      failures: [],
      pending: [],
    });
    expect(collectResults('mocha', '', mocha6).results).toEqual([
      { id: 'slugify lower-cases', status: 'passed' },
    ]);
  });
});
