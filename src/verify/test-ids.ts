import type { TestResult, TestStatus } from '../testrunners/reports/types.js';
import type { Cell, TaskGrade, Verdict } from './types.js';

/**
 * A test id split into the file it names (null when it names none) and its full title, the describe
 * titles and the test title joined by single spaces. Accepted forms (see docs/operating.md, "Tasks"):
 * the judge's `file > describe > title`, `file::describe title` (SWE-bench-style JavaScript rows; pytest's
 * `file::Class::test` too), jest's `fullName` and vitest's or mocha's full titles (`describe title`), with
 * or without ` > ` between the titles.
 */
interface TestName {
  file: string | null;
  title: string;
}

/** A first segment that is a path to a source file: `test/a.test.ts`, `spec.js`. */
const FILE = /^[^\s]*\.[cm]?[jt]sx?$|^[^\s]*\/[^\s]*$|^[^\s]+\.(py|go)$/;

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

export function splitTestId(id: string): TestName {
  const colons = id.indexOf('::');
  if (colons > 0 && FILE.test(id.slice(0, colons)))
    return { file: id.slice(0, colons), title: squash(id.slice(colons + 2).replaceAll(' > ', ' ')) };
  const parts = id.split(' > ');
  if (parts.length > 1 && FILE.test(parts[0]!))
    return { file: parts[0]!, title: squash(parts.slice(1).join(' ')) };
  return { file: null, title: squash(parts.join(' ')) };
}

/** Files match when equal or when one is the other below a directory (`./test/a.js`, `/workspace/test/a.js`). */
const sameFile = (a: string, b: string) => {
  const [x, y] = [a.replace(/^\.\//, ''), b.replace(/^\.\//, '')];
  return x === y || x.endsWith(`/${y}`) || y.endsWith(`/${x}`);
};

export type IdMatch = { status: TestStatus; id: string } | { status: 'missing'; why: string };

/**
 * Finds a row's test id among a report's results: the exact id first, then the same file (when both
 * name one) and the same full title. Without a file on either side the title must be unique in the report.
 */
export function matchTestIds(
  rowIds: readonly string[],
  results: readonly TestResult[],
): Map<string, IdMatch> {
  const exact = new Map(results.map((r) => [r.id, r.status]));
  const byTitle = new Map<string, { r: TestResult; name: TestName }[]>();
  for (const r of results) {
    const name = splitTestId(r.id);
    byTitle.set(name.title, [...(byTitle.get(name.title) ?? []), { r, name }]);
  }
  const out = new Map<string, IdMatch>();
  for (const id of rowIds) {
    const status = exact.get(id);
    if (status !== undefined) {
      out.set(id, { status, id });
      continue;
    }
    const want = splitTestId(id);
    const same = (byTitle.get(want.title) ?? []).filter(
      (c) => want.file === null || c.name.file === null || sameFile(want.file, c.name.file),
    );
    const withFile = same.filter((c) => want.file !== null && c.name.file !== null);
    const found = withFile.length === 1 ? withFile : same;
    if (found.length === 1) out.set(id, { status: found[0]!.r.status, id: found[0]!.r.id });
    else
      out.set(id, {
        status: 'missing',
        why: found.length === 0 ? 'not in the report' : `${found.length} tests in the report have this name`,
      });
  }
  return out;
}

const more = (ids: readonly string[], show: (id: string) => string = (id) => id) =>
  ids.slice(0, 3).map(show).join(', ') + (ids.length > 3 ? ` and ${ids.length - 3} more` : '');

/**
 * SWE-bench's grading of one run: resolved iff every FAIL_TO_PASS passed and every PASS_TO_PASS passed
 * or was skipped. An id the report does not contain is missing, never failing: a missing FAIL_TO_PASS
 * makes the run unfit to grade the row (`invalid_test_run`); missing PASS_TO_PASS ids are named.
 */
export function gradeRow(
  F2P: readonly string[],
  P2P: readonly string[],
  cell: Pick<Cell, 'per_test' | 'results' | 'exit_code'>,
): { grade: Omit<TaskGrade, 'instance_id'>; verdict: Verdict; reason: string } {
  const matched = matchTestIds([...F2P, ...P2P], cell.results);
  const whole: IdMatch = { status: cell.exit_code === 0 ? 'passed' : 'failed', id: '' };
  const split = (ids: readonly string[], ok: (s: TestStatus) => boolean) => {
    const lists = { success: [] as string[], failure: [] as string[], missing: [] as string[] };
    for (const id of ids) {
      const m = cell.per_test ? matched.get(id)! : whole;
      lists[m.status === 'missing' ? 'missing' : ok(m.status) ? 'success' : 'failure'].push(id);
    }
    return lists;
  };
  const f = split(F2P, (s) => s === 'passed');
  const p = split(P2P, (s) => s === 'passed' || s === 'skipped');
  const why = (id: string) => {
    const m = matched.get(id);
    return m?.status === 'missing' ? `${id} (${m.why})` : id;
  };
  const missing = (ids: string[], kind: string) =>
    ids.length === 0 ? '' : ` ${ids.length} ${kind} test(s) are missing from the report: ${more(ids, why)}.`;
  const resolved = f.failure.length === 0 && f.missing.length === 0 && p.failure.length === 0;
  const grade = { resolved, FAIL_TO_PASS: f, PASS_TO_PASS: p };
  const out = (verdict: Verdict, reason: string) => ({ grade, verdict, reason });
  const missingP2P = missing(p.missing, 'PASS_TO_PASS');
  if (f.missing.length > 0)
    return out(
      'invalid_test_run',
      `The test run cannot grade the row:${missing(f.missing, 'FAIL_TO_PASS')}${missingP2P}`,
    );
  if (resolved)
    return out(
      'verified',
      `Resolved: all ${F2P.length} FAIL_TO_PASS and ${P2P.length - p.missing.length} PASS_TO_PASS tests pass.${missingP2P}`,
    );
  if (p.failure.length > 0)
    return out(
      'regression',
      `Unresolved: ${p.failure.length} PASS_TO_PASS test(s) fail: ${more(p.failure)}.${missingP2P}`,
    );
  return out(
    'no_reproduction',
    `Unresolved: ${f.failure.length} FAIL_TO_PASS test(s) do not pass: ${more(f.failure)}.${missingP2P}`,
  );
}
