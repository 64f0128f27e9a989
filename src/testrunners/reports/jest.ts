import { z } from 'zod';
import type { TestResult, TestStatus } from './types.js';
import { mergeResults, relativeToRoot } from './types.js';

// Only the fields the judge reads; jest writes many more, so these schemas are deliberately loose.
const Assertion = z.object({
  ancestorTitles: z.array(z.string()),
  title: z.string(),
  status: z.string(),
});
const Suite = z.object({
  name: z.string(),
  status: z.string().optional(),
  message: z.string().optional(),
  assertionResults: z.array(Assertion),
});
const JestJson = z.object({ testResults: z.array(Suite) });

const STATUS: Record<string, TestStatus> = { passed: 'passed', failed: 'failed' };

/** Results of `jest --json` (and vitest's json reporter, which writes the same layout). A suite that failed to run (no assertions) is one `error` result for its file. */
export function parseJestJson(json: string): TestResult[] | null {
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch {
    return null;
  }
  const parsed = JestJson.safeParse(data);
  if (!parsed.success) return null;
  const results: TestResult[] = [];
  for (const suite of parsed.data.testResults) {
    const file = relativeToRoot(suite.name);
    if (suite.assertionResults.length === 0) {
      if (suite.status === 'failed' || suite.message) results.push({ id: file, status: 'error' });
      continue;
    }
    for (const a of suite.assertionResults) {
      const status = STATUS[a.status] ?? 'skipped'; // pending, todo, skipped, disabled
      // vitest puts an empty title for the file level in ancestorTitles.
      results.push({ id: [file, ...a.ancestorTitles.filter(Boolean), a.title].join(' > '), status });
    }
  }
  return mergeResults(results);
}
