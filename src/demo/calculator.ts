import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scriptFromToolCalls, type ScriptStep } from '../emulator/scripted-model.js';
import { fileVersion } from '../tools/files.js';
import { git } from '../workspace/git.js';

/** The built-in demo repository: examples/calculator, five tests, two failing on the shipped code. */
export const CALCULATOR_DIR = fileURLToPath(new URL('../../examples/calculator', import.meta.url));
export const CALCULATOR_TEST_ARGV = ['node', '--test'];
export const CALCULATOR_ISSUE = readFileSync(path.join(CALCULATOR_DIR, 'ISSUE.md'), 'utf8');

/** Creates a fresh git repository from the example; returns its path and base commit. */
export async function createCalculatorRepo(parent = tmpdir()): Promise<{ repo: string; baseCommit: string }> {
  const repo = mkdtempSync(path.join(parent, 'agenticfix-calculator-'));
  cpSync(CALCULATOR_DIR, repo, { recursive: true });
  await git(['init', '-q', '-b', 'main'], { cwd: repo });
  await git(['add', '-A'], { cwd: repo });
  await git(['commit', '-q', '-m', 'calculator with two bugs'], { cwd: repo });
  const baseCommit = (await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim();
  return { repo, baseCommit };
}

/**
 * A fresh directory under `parent` holding `fixture` (the calculator unless given) with a
 * .github/agenticfix.yml that runs `test`, then `more` lines: a repository for the GitHub emulator.
 */
export function repoSource(
  parent: string,
  test: readonly string[],
  o: { fixture?: string; more?: string } = {},
): string {
  const dir = mkdtempSync(path.join(parent, 'src-'));
  cpSync(o.fixture ?? CALCULATOR_DIR, dir, { recursive: true });
  mkdirSync(path.join(dir, '.github'), { recursive: true });
  writeFileSync(path.join(dir, '.github/agenticfix.yml'), `test: ${JSON.stringify(test)}\n${o.more ?? ''}`);
  return dir;
}

/** The Dockerfile the demo's model writes for the calculator (node from Debian's packages). */
export const calculatorDockerfile = (baseImage: string) =>
  [
    `FROM ${baseImage}`,
    'RUN apt-get update && apt-get install -y --no-install-recommends nodejs && rm -rf /var/lib/apt/lists/*',
    'WORKDIR /workspace',
    '',
  ].join('\n');

/** A scripted calculator run: build the environment from calculatorDockerfile, make `calls`, finish. */
export const calculatorScript = (
  baseImage: string,
  calls: { name: string; arguments: Record<string, unknown> }[] = calculatorFixCalls(),
  summary = 'done',
): ScriptStep[] =>
  scriptFromToolCalls(
    [{ name: 'build_environment', arguments: { dockerfile: calculatorDockerfile(baseImage) } }, ...calls],
    summary,
  );

/**
 * The fixed repair: read the source, fix subtract, make divide throw on zero, run the tests.
 * Versions are those of the file as each edit will find it, so the sequence is replayable.
 */
export function calculatorFixCalls(): { name: string; arguments: Record<string, unknown> }[] {
  const file = 'src/calculator.js';
  const v0 = readFileSync(path.join(CALCULATOR_DIR, file), 'utf8');
  const e1 = { old_text: '  return b - a;', new_text: '  return a - b;' };
  const v1 = v0.replace(e1.old_text, e1.new_text);
  const e2 = {
    old_text: '  return a / b;',
    new_text: `${CALCULATOR_REVIEWED_LINE}\n  return a / b;`,
  };
  return [
    { name: 'read_file', arguments: { path: file } },
    { name: 'edit_file', arguments: { path: file, ...e1, version: fileVersion(v0) } },
    { name: 'edit_file', arguments: { path: file, ...e2, version: fileVersion(v1) } },
    { name: 'run_tests', arguments: {} },
  ];
}

/**
 * Attempt `n` (from 1) of the demo's `--attempts`, in turn: one that edits the wrong function (add
 * then subtracts: a regression), a verified fix that also adds a comment, and the smallest verified fix.
 */
export function calculatorAttemptCalls(n: number): { name: string; arguments: Record<string, unknown> }[] {
  const fix = calculatorFixCalls();
  const kind = (n - 1) % 3;
  if (kind === 2) return fix;
  const file = 'src/calculator.js';
  if (kind === 0) {
    const wrong = { old_text: '  return a + b;', new_text: '  return a - b;' };
    const v0 = readFileSync(path.join(CALCULATOR_DIR, file), 'utf8');
    return [
      fix[0]!,
      { name: 'edit_file', arguments: { path: file, ...wrong, version: fileVersion(v0) } },
      fix[3]!,
    ];
  }
  const [fixed] = fixedCalculator(); // the file as the two fixes leave it
  const edit = {
    old_text: CALCULATOR_REVIEWED_LINE,
    new_text: `  // Dividing by zero is refused, not answered with Infinity.\n${CALCULATOR_REVIEWED_LINE}`,
  };
  const comment = { name: 'edit_file', arguments: { path: file, ...edit, version: fileVersion(fixed) } };
  return [...fix.slice(0, 3), comment, fix[3]!];
}

/** The line of the fixed file a maintainer's review comments on: divide's new error. */
export const CALCULATOR_REVIEWED_LINE = "  if (b === 0) throw new RangeError('division by zero');";

/**
 * The revision the demo's maintainer asks for on the fixed file (as the fix left it): the error
 * message names the argument.
 */
export function calculatorRevisionCalls(): { name: string; arguments: Record<string, unknown> }[] {
  const file = 'src/calculator.js';
  const [fixed] = fixedCalculator();
  const edit = {
    old_text: CALCULATOR_REVIEWED_LINE,
    new_text: "  if (b === 0) throw new RangeError('division by zero: the divisor b is 0');",
  };
  return [
    { name: 'read_file', arguments: { path: file } },
    { name: 'edit_file', arguments: { path: file, ...edit, version: fileVersion(fixed) } },
    { name: 'run_tests', arguments: {} },
  ];
}

/** src/calculator.js after the fixed repair, and the 1-based line of the reviewed statement in it. */
export function fixedCalculator(): [string, number] {
  const v0 = readFileSync(path.join(CALCULATOR_DIR, 'src/calculator.js'), 'utf8');
  const fixed = v0
    .replace('  return b - a;', '  return a - b;')
    .replace('  return a / b;', `${CALCULATOR_REVIEWED_LINE}\n  return a / b;`);
  return [fixed, fixed.split('\n').indexOf(CALCULATOR_REVIEWED_LINE) + 1];
}
