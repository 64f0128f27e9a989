import { z } from 'zod';

/** Where the sandbox mounts the worktree; report paths and test ids are made relative to it. */
export const CONTAINER_ROOT = CONTAINER_WORKTREE;

export const TestStatusSchema = z.enum(['passed', 'failed', 'error', 'skipped']);
export type TestStatus = z.infer<typeof TestStatusSchema>;

export const TestResultSchema = z.strictObject({ id: z.string(), status: TestStatusSchema });
export type TestResult = z.infer<typeof TestResultSchema>;

import { CONTAINER_WORKTREE, type Runner } from '../runners.js';

export { RunnerSchema, type Runner } from '../runners.js';

/** Per-test results of one run, or `per_test: false` when only the exit code is known. */
export interface ParsedResults {
  runner: Runner;
  per_test: boolean;
  /** Which report produced the results (junit-xml, pytest-rA, jest-json, tap, mocha-json, go-json, exit-code). */
  source: string;
  results: TestResult[];
}

const RANK: Record<TestStatus, number> = { skipped: 0, passed: 1, failed: 2, error: 3 };

/** One result per id, keeping the worst status (a test that passed its call but errored in teardown is an error). */
export function mergeResults(results: readonly TestResult[]): TestResult[] {
  const byId = new Map<string, TestStatus>();
  for (const r of results) {
    const prev = byId.get(r.id);
    if (prev === undefined || RANK[r.status] > RANK[prev]) byId.set(r.id, r.status);
  }
  return [...byId].map(([id, status]) => ({ id, status }));
}

/** Makes a container path relative to the worktree (`/workspace/test/a.js` → `test/a.js`). */
export function relativeToRoot(p: string): string {
  return p.startsWith(`${CONTAINER_ROOT}/`) ? p.slice(CONTAINER_ROOT.length + 1) : p;
}
