import { z } from 'zod';
import type { TestResult } from './types.js';
import { mergeResults } from './types.js';

const Event = z.object({
  Action: z.string(),
  Package: z.string().optional(),
  Test: z.string().optional(),
});

/**
 * Results of `go test -json` (one JSON event per line; other lines, such as build output, are
 * ignored). Ids are `package::TestName` (subtests keep go's `Parent/sub` form). A package that
 * failed without any failing test (build failure, panic in init, TestMain exit) is one `error`.
 */
export function parseGoTestJson(stream: string): TestResult[] | null {
  const results: TestResult[] = [];
  const failedPackages = new Set<string>();
  const packagesWithFailedTests = new Set<string>();
  let events = 0;
  for (const line of stream.split('\n')) {
    if (!line.startsWith('{')) continue;
    let data: unknown;
    try {
      data = JSON.parse(line);
    } catch {
      continue;
    }
    const e = Event.safeParse(data);
    if (!e.success) continue;
    events++;
    const { Action, Test } = e.data;
    const pkg = e.data.Package ?? ''; // build-output/build-fail events name no package: the package's own fail follows
    if (Action !== 'pass' && Action !== 'fail' && Action !== 'skip') continue;
    if (!Test) {
      if (Action === 'fail') failedPackages.add(pkg);
      continue;
    }
    if (Action === 'fail') packagesWithFailedTests.add(pkg);
    results.push({
      id: `${pkg}::${Test}`,
      status: Action === 'pass' ? 'passed' : Action === 'fail' ? 'failed' : 'skipped',
    });
  }
  if (events === 0) return null;
  for (const pkg of failedPackages)
    if (!packagesWithFailedTests.has(pkg)) results.push({ id: pkg, status: 'error' });
  return mergeResults(results);
}
