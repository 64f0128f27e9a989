import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileVersion } from '../tools/files.js';
import { git } from '../workspace/git.js';

/**
 * The context benchmark's repository, generated so that it is realistic in size without vendoring it:
 * a currency ledger whose source file holds 600 conversion functions (about 190 KB) and whose suite has
 * 606 `node --test` tests. One bug: `roundCents` rounds negative amounts away from the ledger's rule
 * (half towards +∞), which fails two tests.
 */
const UNITS = 600;
const SOURCE = 'src/ledger.js';
const TESTS = 'test/ledger.test.js';

const rate = (i: number): number => 1_000_000 + ((i * 7919) % 500_000) - 250_000;
const unit = (i: number): string => `unit${String(i).padStart(3, '0')}`;

const BUGGY_ROUND = [
  'export function roundCents(amount) {',
  '  const cents = amount * 100;',
  '  return (cents < 0 ? -Math.round(-cents) : Math.round(cents)) / 100;',
  '}',
].join('\n');
const FIXED_ROUND = [
  'export function roundCents(amount) {',
  '  const cents = amount * 100;',
  '  return Math.round(cents) / 100;',
  '}',
].join('\n');

function source(): string {
  const fns = Array.from({ length: UNITS }, (_, i) =>
    [
      '/**',
      ` * Converts an amount held in ${unit(i)} into the ledger's base unit, using rate table entry ${i}.`,
      ' * Rates are integers in parts per million so that a conversion is exact before rounding; the',
      ' * result is rounded to cents with the ledger rule (see roundCents).',
      ' */',
      `export function convert_${unit(i)}(amount) {`,
      "  if (!Number.isFinite(amount)) throw new TypeError('amount must be a finite number');",
      `  const rate = ${rate(i)};`,
      '  return roundCents((amount * rate) / 1_000_000);',
      '}',
      '',
    ].join('\n'),
  );
  return [
    '// The ledger: conversions from every supported unit into the base unit, rounded to cents.',
    '',
    '/** Rounds to cents, half towards +infinity (the ledger rule: -0.125 becomes -0.12). */',
    BUGGY_ROUND,
    '',
    ...fns,
  ].join('\n');
}

function tests(): string {
  // Expected values follow the fixed rule; the two negative halves are the ones the bug gets wrong.
  const round = [1.005, 2.5, -0.125, -1.625, 0, 10.001].map((x) => {
    const y = Math.round(x * 100) / 100;
    return `test('roundCents(${x}) is ${y}', () => assert.equal(roundCents(${x}), ${y}));`;
  });
  const convert = Array.from({ length: UNITS }, (_, i) => {
    const expected = Math.round(((100 * rate(i)) / 1_000_000) * 100) / 100;
    return `test('convert_${unit(i)} converts 100', () => assert.equal(convert_${unit(i)}(100), ${expected}));`;
  });
  return [
    "import { test } from 'node:test';",
    "import assert from 'node:assert/strict';",
    "import * as ledger from '../src/ledger.js';",
    '',
    'const { roundCents } = ledger;',
    ...Array.from({ length: UNITS }, (_, i) => `const convert_${unit(i)} = ledger.convert_${unit(i)};`),
    '',
    ...round,
    ...convert,
    '',
  ].join('\n');
}

export const LEDGER_ISSUE = [
  '# roundCents rounds negative halves the wrong way',
  '',
  'The ledger rule is "half towards +infinity": roundCents(-0.125) must be -0.12, but it returns -0.13.',
  'Every conversion goes through roundCents, so refunds are off by a cent.',
  '',
].join('\n');

/** Creates the ledger repository in a fresh directory under `parent`; returns it and its base commit. */
export async function createLedgerRepo(parent: string): Promise<{ repo: string; baseCommit: string }> {
  const repo = mkdtempSync(path.join(parent, 'agenticfix-ledger-'));
  mkdirSync(path.join(repo, 'src'));
  mkdirSync(path.join(repo, 'test'));
  const files: Record<string, string> = {
    'package.json': JSON.stringify(
      { name: 'ledger', version: '1.0.0', type: 'module', private: true, scripts: { test: 'node --test' } },
      null,
      2,
    ),
    'ISSUE.md': LEDGER_ISSUE,
    [SOURCE]: source(),
    [TESTS]: tests(),
  };
  for (const [f, text] of Object.entries(files)) writeFileSync(path.join(repo, f), text);
  await git(['init', '-q', '-b', 'main'], { cwd: repo });
  await git(['add', '-A'], { cwd: repo });
  await git(['commit', '-q', '-m', 'ledger'], { cwd: repo });
  const baseCommit = (await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim();
  return { repo, baseCommit };
}

type Call = { name: string; arguments: Record<string, unknown> };

/**
 * A fixed 25-call trajectory as a model works on a large repository: explore, reproduce, page through
 * the big source and test files in windows, search, fix, add a regression test, re-run narrowed and
 * whole suites, review. It reads the same places repeatedly on purpose, as models do.
 */
export function ledgerTrajectory(): Call[] {
  const v0 = source();
  const read = (p: string, extra: Record<string, unknown> = {}): Call => ({
    name: 'read_file',
    arguments: { path: p, ...extra },
  });
  const search = (query: string): Call => ({ name: 'search_code', arguments: { query } });
  const tests = (only?: string[]): Call => ({ name: 'run_tests', arguments: only ? { tests: only } : {} });
  const diff: Call = { name: 'git_diff', arguments: {} };
  const regression = 'test/round.test.js';
  return [
    { name: 'list_files', arguments: {} },
    read('ISSUE.md'),
    read('package.json'),
    tests(),
    search('roundCents'),
    read(SOURCE),
    read(SOURCE, { start_line: 300 }),
    read(TESTS),
    read(TESTS, { start_line: 600, end_line: 615 }),
    tests(['roundCents']),
    search('Math.round'),
    read(SOURCE, { start_line: 1, end_line: 12 }),
    {
      name: 'edit_file',
      arguments: { path: SOURCE, old_text: BUGGY_ROUND, new_text: FIXED_ROUND, version: fileVersion(v0) },
    },
    tests(['roundCents']),
    tests(),
    search('convert_unit'),
    read(SOURCE, { start_line: 5000 }),
    {
      name: 'create_file',
      arguments: {
        path: regression,
        content: [
          "import { test } from 'node:test';",
          "import assert from 'node:assert/strict';",
          "import { roundCents } from '../src/ledger.js';",
          '',
          "test('negative halves round towards +infinity', () => {",
          '  assert.equal(roundCents(-0.125), -0.12);',
          '  assert.equal(roundCents(-0.375), -0.37);',
          '});',
          '',
        ].join('\n'),
      },
    },
    tests([regression]),
    diff,
    read(SOURCE, { start_line: 1, end_line: 12 }),
    tests(),
    read('ISSUE.md'),
    diff,
    tests(),
  ];
}

export const LEDGER_FIX_SUMMARY = 'roundCents now rounds halves towards +infinity; regression test added.';
