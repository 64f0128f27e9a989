import type { TestResult, TestStatus } from '../testrunners/reports/types.js';

/**
 * A test id split into the file it names (null when it names none) and its full title, the describe
 * titles and the test title joined by single spaces. Accepted forms (see the README, "Test ids"):
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
