import type { TestStatus } from '../testrunners/reports/types.js';
import type { Cell, CellName, Evidence, Verdict } from './types.js';

export interface Judgement {
  verdict: Verdict;
  reason: string;
  evidence: Evidence;
  tests_modified: string[];
}

const failing = (s: TestStatus | undefined) => s === 'failed' || s === 'error';
const RANK: Record<TestStatus, number> = { error: 0, failed: 0, skipped: 1, passed: 2 };

const list = (ids: readonly string[], max = 3) =>
  ids.slice(0, max).join(', ') + (ids.length > max ? ` and ${ids.length - max} more` : '');

/**
 * The verdict from the four cells. Evidence counts only the untouched base tests and the patch's new
 * tests: a reproduction is a new test, or an untouched base test, that fails on the base source and
 * passes with the patch; a regression is a base test that passed and now fails. Flaky tests are
 * excluded everywhere. Precedence:
 * invalid_test_run > regression > tests_modified > no_reproduction > verified.
 */
export function evaluate(
  cells: Record<CellName, Cell>,
  staticModifications: readonly string[],
  patchHasTests: boolean,
): Judgement {
  const flaky = [...new Set(Object.values(cells).flatMap((c) => c.flaky))].sort();
  const excluded = new Set(flaky);
  const status = (c: Cell) =>
    new Map(c.results.filter((r) => !excluded.has(r.id)).map((r) => [r.id, r.status]));
  const [A, B, C, D] = [cells.base, cells.patched_source, cells.patch_tests, cells.patched].map(status) as [
    Map<string, TestStatus>,
    Map<string, TestStatus>,
    Map<string, TestStatus>,
    Map<string, TestStatus>,
  ];
  const perTest = Object.values(cells).every((c) => c.per_test);
  const evidence: Evidence = { reproduced: [], regressions: [], new_tests_failing: [], fail_both: [], flaky };
  const mods = [...staticModifications];

  const invalid = Object.values(cells).filter((c) => c.problem !== null);
  if (invalid.length > 0) {
    const reason = invalid.map((c) => `${c.name}: ${c.problem}`).join('; ');
    return {
      verdict: 'invalid_test_run',
      reason: `The test run cannot be trusted (${reason}).`,
      evidence,
      tests_modified: mods,
    };
  }

  if (!perTest) return byExitCode(cells, evidence, mods, patchHasTests);

  for (const [id, a] of A) {
    const b = B.get(id);
    const d = D.get(id);
    if (a === 'passed' && (b === undefined || failing(b) || failing(d))) evidence.regressions.push(id);
    if (failing(a) && failing(b)) evidence.fail_both.push(id);
    if (failing(a) && b === 'passed' && (d === undefined || d === 'passed')) evidence.reproduced.push(id);
    // Same source, different result: only an edit to the test itself can explain it.
    const c = C.get(id);
    if (c !== undefined && RANK[c] > RANK[a])
      mods.push(`existing test ${id} went from ${a} to ${c} on the base source with the patch's tests`);
    if (b !== undefined && d !== undefined && RANK[d] > RANK[b])
      mods.push(`existing test ${id} went from ${b} to ${d} on the patched source with the patch's tests`);
  }
  const cHasFailures = [...C.values()].some(failing);
  // New tests are those the patched cell reports; ids only in patch_tests are collection errors of the base source.
  const newIds = [...D.keys()].filter((id) => !A.has(id)).sort();
  for (const id of newIds) {
    const c = C.get(id);
    const d = D.get(id);
    if (d !== 'passed' && d !== 'skipped') evidence.new_tests_failing.push(id);
    else if (d === 'passed' && (failing(c) || (c === undefined && cHasFailures)))
      evidence.reproduced.push(id);
  }
  evidence.regressions.sort();
  evidence.fail_both.sort();

  if (evidence.regressions.length > 0)
    return judged(
      'regression',
      `${evidence.regressions.length} test(s) that passed on the base fail with the patch: ${list(evidence.regressions)}.`,
    );
  if (mods.length > 0)
    return judged(
      'tests_modified',
      `The patch changes existing tests, which cannot count as evidence: ${list(mods, 2)}.`,
    );
  if (evidence.new_tests_failing.length > 0)
    return judged(
      'no_reproduction',
      `The patch's own tests do not pass with the patch: ${list(evidence.new_tests_failing)}.`,
    );
  if (evidence.reproduced.length === 0)
    return judged(
      'no_reproduction',
      newIds.length === 0
        ? 'No regression, but no test fails on the base source and passes with the patch.'
        : `No regression, but none of the patch's ${newIds.length} new test(s) fails on the base source.`,
    );
  return judged(
    'verified',
    `${evidence.reproduced.length} test(s) fail on the base source and pass with the patch (${list(evidence.reproduced)}); no test that passed on the base fails.`,
  );

  function judged(verdict: Verdict, reason: string): Judgement {
    return { verdict, reason, evidence, tests_modified: mods };
  }
}

/** Without per-test results only whole-suite exit codes are evidence. */
function byExitCode(
  cells: Record<CellName, Cell>,
  evidence: Evidence,
  mods: string[],
  patchHasTests: boolean,
): Judgement {
  const passed = (c: Cell) => c.exit_code === 0;
  const note = ' (exit codes only: the test command gave no per-test report)';
  const judged = (verdict: Verdict, reason: string): Judgement => ({
    verdict,
    reason: reason + note,
    evidence,
    tests_modified: mods,
  });
  if (passed(cells.base) && (!passed(cells.patched_source) || !passed(cells.patched)))
    return judged('regression', 'The suite passes on the base but fails with the patch.');
  if (mods.length > 0) return judged('tests_modified', `The patch changes existing tests: ${list(mods, 2)}.`);
  if (!passed(cells.patched)) return judged('no_reproduction', 'The suite still fails with the patch.');
  if (!passed(cells.base) && passed(cells.patched_source))
    return judged('verified', 'The base suite fails on the base source and passes with the patch.');
  if (!patchHasTests) return judged('no_reproduction', 'No regression, but the patch adds no test.');
  if (passed(cells.patch_tests))
    return judged('no_reproduction', "The patch's tests pass on the base source too.");
  return judged(
    'verified',
    "The suite with the patch's tests fails on the base source and passes with the patch.",
  );
}
