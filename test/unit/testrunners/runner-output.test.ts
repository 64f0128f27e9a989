import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { collapseRepeats, omitPassLines, shapeOutput } from '../../../src/testrunners/failures.js';
import { stripAnsi } from '../../../src/testrunners/output.js';
import { parseTestSummary } from '../../../src/testrunners/summary.js';
import { renderObservation } from '../../../src/tools/observation.js';
import { ok } from '../../../src/tools/types.js';

/**
 * Real output of pytest 9, jest 29, vitest 1.6, mocha 10 and node 20's test runner on the same small
 * inventory library (test/fixtures/runner-output/sources: 300-odd passing tests, one that prints 1,500
 * lines, a long list diff, a long dict diff, an error in a fixture).
 */
const DIR = fileURLToPath(new URL('../../fixtures/runner-output', import.meta.url));
const read = (f: string) => (existsSync(path.join(DIR, f)) ? readFileSync(path.join(DIR, f), 'utf8') : '');

interface Case {
  fixture: string;
  summary: { passed: number; failed: number; errors?: number };
  /** Failing test ids, in order, with lines of each one's assertion that must reach the model. */
  failures: [string, string[]][];
}

const CASES: Case[] = [
  {
    fixture: 'pytest-rA-vv',
    summary: { passed: 302, failed: 2, errors: 1 },
    failures: [
      ['tests/test_inventory.py::test_sync', ['E       ConnectionError: warehouse database unreachable']],
      [
        'tests/test_inventory.py::test_restock_all',
        [
          '>       assert restock(levels, 5) == [x + 5 for x in levels]',
          'At index 59 diff: 59 != 64',
          '-     64,',
          '+     59,',
        ],
      ],
      [
        'tests/test_inventory.py::test_report_levels',
        [
          "{'sku-011': {'level': 5, 'status': 'low'}} != {'sku-011': {'level': 7, 'status': 'ok'}}",
          "E         -         'level': 7,",
          "E         +         'status': 'low',",
        ],
      ],
    ],
  },
  {
    fixture: 'pytest-rA',
    summary: { passed: 302, failed: 2, errors: 1 },
    failures: [
      ['tests/test_inventory.py::test_sync', ['ConnectionError: warehouse database unreachable']],
      ['tests/test_inventory.py::test_restock_all', ['At index 59 diff: 59 != 64']],
      [
        'tests/test_inventory.py::test_report_levels',
        ["{'sku-011': {'level': 5, 'status': 'low'}} != {'sku-011'"],
      ],
    ],
  },
  {
    fixture: 'jest',
    summary: { passed: 41, failed: 3 },
    failures: [
      ['restock › restocks every item', ['expect(received).toEqual(expected)', '-   64,', '+   59,']],
      ['restock › reports levels after restocking', ['-     "level": 7,', '+     "status": "low",']],
      ['restock › syncs with the warehouse', ['warehouse database unreachable']],
    ],
  },
  {
    fixture: 'vitest',
    summary: { passed: 41, failed: 3 },
    failures: [
      [
        'test/vitest/inventory.test.mjs > restock > restocks every item',
        ['AssertionError: expected [ Array(60) ] to deeply equal [ Array(60) ]', '-   64,', '+   59,'],
      ],
      [
        'test/vitest/inventory.test.mjs > restock > reports levels after restocking',
        ['-     "level": 7,', '+     "status": "low",'],
      ],
      [
        'test/vitest/inventory.test.mjs > restock > syncs with the warehouse',
        ['Error: warehouse database unreachable'],
      ],
    ],
  },
  {
    fixture: 'mocha',
    summary: { passed: 41, failed: 3 },
    failures: [
      [
        'restock restocks every item',
        ['AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:', '+   59', '-   64'],
      ],
      ['restock reports levels after restocking', ["+     status: 'low'", '-     level: 7,']],
      ['restock syncs with the warehouse', ['Error: warehouse database unreachable']],
    ],
  },
  {
    fixture: 'node-spec',
    summary: { passed: 41, failed: 2 },
    failures: [
      [
        'restocks every item',
        ['AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:', '+   59', '-   64'],
      ],
      ['syncs with the warehouse', ['Error: warehouse database unreachable']],
    ],
  },
  {
    fixture: 'node-tap',
    summary: { passed: 41, failed: 2 },
    failures: [
      ['restocks every item', ['Expected values to be strictly deep-equal:', '+   59', '-   64']],
      ['syncs with the warehouse', ["error: 'warehouse database unreachable'"]],
    ],
  },
];

/** The data of a run_tests result for this output, as the tool builds it. */
function testResult(stdout: string, stderr: string) {
  const shaped = shapeOutput(stdout, stderr);
  return {
    status: 'failed',
    exit_code: 1,
    summary: parseTestSummary(stdout, stderr),
    failures: shaped.failures,
    stdout: omitPassLines(shaped.stdout).text,
    stderr: omitPassLines(shaped.stderr).text,
  };
}

describe.each(CASES)('real $fixture output', ({ fixture, summary, failures }) => {
  const stdout = read(`${fixture}.stdout`);
  const stderr = read(`${fixture}.stderr`);
  const data = testResult(stdout, stderr);

  it('gives the counts and each failing test once, with its whole assertion', () => {
    expect(data.summary).toMatchObject(summary);
    expect(data.failures.map((f) => f.id)).toEqual(failures.map(([id]) => id));
    for (const [i, [, lines]] of failures.entries()) {
      for (const line of lines) expect(data.failures[i]!.message).toContain(line);
      expect(data.failures[i]!.message).not.toMatch(/\[\.\.\. \d+ (lines of failure|of \d+ characters) cut/);
    }
    // No failure twice: the output points to failures instead of repeating the block, and has no colour codes.
    const output = `${data.stdout}\n${data.stderr}`;
    for (const [, lines] of failures) for (const line of lines.slice(1)) expect(output).not.toContain(line);
    expect(output).toBe(stripAnsi(output));
    expect(output).toMatch(/\[failure of .+: in failures\]/);
  });

  it.each([12_000, 8000, 6000, 4500])(
    'keeps the first failure whole and the closing summary at %i characters',
    (max) => {
      const text = renderObservation(ok(data), max);
      expect(text.length).toBeLessThanOrEqual(max);
      const o = JSON.parse(text);
      const [id, lines] = failures[0]!;
      expect(o.data.failures[0].id).toBe(id);
      for (const line of lines) expect(o.data.failures[0].message).toContain(line);
      // Later failures are whole or left out, never cut in their middle.
      for (const f of o.data.failures.slice(1)) {
        if (typeof f === 'string') expect(f).toMatch(/^\[\.\.\. \d+ of \d+ entries cut \.\.\.\]$/);
        else expect(f).toEqual(data.failures.find((x) => x.id === f.id));
      }
      const closing = {
        'pytest-rA-vv': /=+ 2 failed, 302 passed, 1 warning, 1 error in [\d.]+s =+$/m,
        'pytest-rA': /=+ 2 failed, 302 passed, 1 warning, 1 error in [\d.]+s =+$/m,
        jest: /Tests: {7}3 failed, 41 passed, 44 total/,
        vitest: /Tests {2}3 failed \| 41 passed \(44\)/,
        mocha: /41 passing \(\d+ms\)\n {2}3 failing/,
        'node-spec': /ℹ fail 2/,
        'node-tap': /# fail 2/,
      }[fixture]!;
      expect(`${o.data.stdout}\n${o.data.stderr}`).toMatch(closing);
    },
  );
});

describe('what is squeezed first', () => {
  it("pytest -rA: the passing test's 1,500 captured lines go before the warnings, and the short summary stays", () => {
    const data = testResult(read('pytest-rA-vv.stdout'), '');
    expect(data.stdout).toContain('imported row 1499');
    const o = JSON.parse(renderObservation(ok(data), 12_000));
    expect(o.truncated).toBe(true);
    expect(o.data.failures).toHaveLength(3);
    expect(o.data.stdout).toMatch(/\[\.\.\. \d+ lines of captured output cut \.\.\.\]/);
    expect(o.data.stdout).not.toContain('imported row 700');
    expect(o.data.stdout).toMatch(/^FAILED tests\/test_inventory.py::test_restock_all - assert \[5, 6/m);
    expect(o.data.stdout).toMatch(/^ERROR tests\/test_inventory.py::test_sync - ConnectionError/m);
    // -vv repeats each message in the short summary: left out, the block is in failures.
    expect(o.data.stdout).toMatch(/lines repeating a failure's message left out/);
  });
});

describe('real vitest output with a shared error block, a runner timeout and suites that fail to load', () => {
  const stdout = read('vitest-shared.stdout');
  const stderr = read('vitest-shared.stderr');

  it('gives one failure per test under a shared block, and counts the suites as errors with their files', () => {
    const shaped = shapeOutput(stdout, stderr);
    const file = 'test/shared.test.mjs > slugify > ';
    // Only the last of the three FAIL lines survived, and the two broken files were not counted.
    expect(shaped.failures.map((f) => [f.id, f.timeout ?? false])).toEqual([
      ['test/broken.test.mjs (suite failed to run)', false],
      ['test/empty.test.mjs (suite failed to run)', false],
      [`${file}drops trailing punctuation of Hello!`, false],
      [`${file}drops trailing punctuation of World?`, false],
      [`${file}drops trailing punctuation of Bye.`, false],
      [`${file}waits`, true],
    ]);
    const shared = shaped.failures.slice(2, 5).map((f) => f.message);
    expect(new Set(shared).size).toBe(1);
    expect(shared[0]).toMatch(/^AssertionError: expected true to be false/);
    expect(shaped.failures[0]!.message).toMatch(/Failed to load url \.\.\/nowhere\.js/);
    expect(shaped.failures[1]!.message).toMatch(/No test suite found in file/);
    expect(parseTestSummary(stdout, stderr)).toEqual({
      passed: 1,
      failed: 4,
      errors: 2,
      skipped: 0,
      source: 'vitest',
    });
  });

  it('collapses identical repeated lines with a count, and leaves jest PASS file lines out like pass lines', () => {
    const hint = 'If this is a long-running test, pass a timeout value as the last argument.';
    const out = collapseRepeats(['a', hint, 'b', hint, hint].join('\n'));
    expect(out).toEqual({ text: ['a', `${hint} [printed 3 times]`, 'b'].join('\n'), collapsed: 2 });
    expect(omitPassLines('PASS test/a.test.js\nPASS test/b.test.js (1.2 s)\nFAIL test/c.test.js')).toEqual({
      text: '[... 2 passing-test lines left out ...]\nFAIL test/c.test.js',
      omitted: 2,
    });
  });
});
