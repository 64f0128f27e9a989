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

function testSource(): string {
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
    [TESTS]: testSource(),
  };
  for (const [f, text] of Object.entries(files)) writeFileSync(path.join(repo, f), text);
  await git(['init', '-q', '-b', 'main'], { cwd: repo });
  await git(['add', '-A'], { cwd: repo });
  await git(['commit', '-q', '-m', 'ledger'], { cwd: repo });
  const baseCommit = (await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim();
  return { repo, baseCommit };
}

export type Call = { name: string; arguments: Record<string, unknown> };

/**
 * A fixed 25-call trajectory as a model works on a large repository: explore, reproduce, page through
 * the big source and test files in windows, search, fix, add a regression test, re-run narrowed and
 * whole suites, review. It reads the same places repeatedly on purpose, as models do.
 */
const read = (p: string, extra: Record<string, unknown> = {}): Call => ({
  name: 'read_file',
  arguments: { path: p, ...extra },
});
const search = (query: string, extra: Record<string, unknown> = {}): Call => ({
  name: 'search_code',
  arguments: { query, ...extra },
});
const tests = (only?: string[]): Call => ({ name: 'run_tests', arguments: only ? { tests: only } : {} });
const script = (text: string): Call => ({ name: 'run_command', arguments: { script: text } });
const diff: Call = { name: 'git_diff', arguments: {} };
const fix: Call = {
  name: 'edit_file',
  arguments: { path: SOURCE, old_text: BUGGY_ROUND, new_text: FIXED_ROUND, version: fileVersion(source()) },
};
const REGRESSION = 'test/round.test.js';
const asserts = (cases: [number, number][]): string =>
  cases.map(([x, y]) => `  assert.equal(roundCents(${x}), ${y});`).join('\n');
const regressionText = (cases: [number, number][]): string =>
  [
    "import { test } from 'node:test';",
    "import assert from 'node:assert/strict';",
    "import { roundCents } from '../src/ledger.js';",
    '',
    "test('negative halves round towards +infinity', () => {",
    asserts(cases),
    '});',
    '',
  ].join('\n');
const regressionTest = (cases: [number, number][]): Call => ({
  name: 'create_file',
  arguments: { path: REGRESSION, content: regressionText(cases) },
});

export function ledgerTrajectory(): Call[] {
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
    fix,
    tests(['roundCents']),
    tests(),
    search('convert_unit'),
    read(SOURCE, { start_line: 5000 }),
    regressionTest([
      [-0.125, -0.12],
      [-0.375, -0.37],
    ]),
    tests([REGRESSION]),
    diff,
    read(SOURCE, { start_line: 1, end_line: 12 }),
    tests(),
    read('ISSUE.md'),
    diff,
    tests(),
  ];
}

/**
 * A weaker model's 58 calls on the same bug (the issue's 50-100): it explores wider (listings by
 * directory, more windows of both files, more searches), reproduces with a script as well as tests,
 * gets its first edit wrong (an `old_text` not in the file), checks its fix by hand, creates its
 * regression test twice (the second time it exists: an edit instead), and runs the narrowed and whole suites more often. Its re-reads are those of the short
 * trajectory and of a model that checks what it is about to change.
 */
export function ledgerLongTrajectory(): Call[] {
  const repro =
    'node -e "import(\'./src/ledger.js\').then((m) => console.log(m.roundCents(-0.125), m.roundCents(-1.625)))"';
  const first: [number, number][] = [[-0.125, -0.12]];
  const more: [number, number][] = [...first, [-0.375, -0.37], [-1.625, -1.62]];
  return [
    { name: 'list_files', arguments: { max_depth: 1 } },
    read('ISSUE.md'),
    read('package.json'),
    { name: 'list_files', arguments: { path: 'src' } },
    { name: 'list_files', arguments: { path: 'test' } },
    tests(),
    search('roundCents'),
    read(SOURCE),
    search('export function roundCents'),
    read(SOURCE, { start_line: 300 }),
    read(SOURCE, { start_line: 900 }),
    script(repro),
    read(TESTS),
    read(TESTS, { start_line: 600, end_line: 615 }),
    tests(['roundCents']),
    search('Math.round'),
    search('-Math.round', { file_pattern: 'src/**/*.js' }),
    search('half towards'),
    read(SOURCE, { start_line: 1, end_line: 12 }),
    search('roundCents(', { file_pattern: 'test/**' }),
    read(TESTS, { start_line: 604, end_line: 611 }),
    // Its first edit gets the old text wrong (invalid: not in the file).
    {
      name: 'edit_file',
      arguments: {
        path: SOURCE,
        old_text: 'return (cents < 0 ? -Math.round(cents) : Math.round(cents)) / 100;',
        new_text: 'return Math.round(cents) / 100;',
        version: fileVersion(source()),
      },
    },
    read(SOURCE, { start_line: 1, end_line: 12 }),
    fix,
    tests(['roundCents']),
    script(repro),
    tests(),
    search('convert_unit'),
    read(SOURCE, { start_line: 2000 }),
    read(SOURCE, { start_line: 5000 }),
    search('Number.isFinite'),
    read(SOURCE, { start_line: 6000 }),
    regressionTest(first),
    tests([REGRESSION]),
    script('node --test test/round.test.js'),
    // It writes the file again (already_exists), then edits it.
    regressionTest(more),
    {
      name: 'edit_file',
      arguments: {
        path: REGRESSION,
        old_text: asserts(first),
        new_text: asserts(more),
        version: fileVersion(regressionText(first)),
      },
    },
    tests([REGRESSION]),
    tests(['roundCents']),
    diff,
    read(TESTS, { start_line: 1, end_line: 8 }),
    search('test(', { file_pattern: 'test/round.test.js' }),
    read(REGRESSION),
    tests(),
    read(SOURCE, { start_line: 1, end_line: 12 }),
    search('cents'),
    read('package.json'),
    script('node --version'),
    tests(['convert_unit001']),
    read(SOURCE, { start_line: 3000, end_line: 3040 }),
    tests(),
    read('ISSUE.md'),
    diff,
    { name: 'list_files', arguments: { path: 'test' } },
    tests(['negative halves']),
    read(SOURCE, { start_line: 1, end_line: 12 }),
    diff,
    tests(),
  ];
}

export const LEDGER_FIX_SUMMARY = 'roundCents now rounds halves towards +infinity; regression test added.';
