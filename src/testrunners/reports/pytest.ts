import { leadingNodeId } from '../failures.js';
import type { TestResult, TestStatus } from './types.js';
import { mergeResults } from './types.js';

const STATUS: Record<string, TestStatus> = {
  PASSED: 'passed',
  XPASS: 'passed', // a non-strict xpass passes; a strict one is reported as FAILED
  FAILED: 'failed',
  ERROR: 'error',
  SKIPPED: 'skipped',
  XFAIL: 'skipped',
};

/**
 * Results from pytest's `-rA` short summary ("PASSED tests/test_a.py::test_x"). Only the summary
 * section is read when its header is present. SKIPPED lines carry a location, not a node id.
 */
export function parsePytestSummary(output: string): TestResult[] {
  const header = output.search(/^=+ short test summary info =+$/m);
  const text = header >= 0 ? output.slice(header) : output;
  const results: TestResult[] = [];
  for (const m of text.matchAll(/^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$/gm)) {
    const kind = m[1]!;
    const rest = m[2]!;
    const id = kind === 'SKIPPED' ? rest.replace(/^\[\d+\] /, '').replace(/: .*$/, '') : leadingNodeId(rest);
    results.push({ id, status: STATUS[kind]! });
  }
  return mergeResults(results);
}
