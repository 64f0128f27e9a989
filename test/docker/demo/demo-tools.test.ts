import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runToolsOnlyDemo } from '../../../src/demo/tools-only.js';
import { sha256 } from '../../../src/trace/trace.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { demoSetup } from '../../support/demo.js';

/** The tools-only demo in a fresh directory, quiet, in `sandbox`. */
const demo = (sandbox: 'local' | 'docker', keepWorktrees = false) =>
  runToolsOnlyDemo({ ...demoSetup('demo-'), sandbox, keepWorktrees, log: () => {} });

describe('trusted tool-chain demo (local sandbox)', () => {
  it('repairs the calculator: 3/2 at base, 5/0 after the edits and 5/0 in a clean worktree', async () => {
    const summary = await demo('local');
    expect(summary).toMatchObject({
      result: 'success',
      base_tests: { passed: 3, failed: 2 },
      after_tests: { passed: 5, failed: 0 },
      verify_tests: { passed: 5, failed: 0 },
      error: null,
      worktrees: [],
    });
    const patch = readFileSync(summary.patch_path!, 'utf8');
    expect(patch).toContain('+  return a - b;');
    expect(patch).toContain("RangeError('division by zero')");
    const result = JSON.parse(readFileSync(summary.result_path, 'utf8'));
    expect(result.success).toBe(true);
    expect(result.artifacts[0].sha256).toBe(sha256(patch));
    const types = readFileSync(summary.trace_path, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).type);
    expect(types.filter((t) => t === 'tool_start')).toHaveLength(5);
    expect(types.filter((t) => t === 'tool_end')).toHaveLength(5);
  });

  it('keeps both worktrees when asked', async () => {
    const summary = await demo('local', true);
    expect(summary.worktrees).toHaveLength(2);
    for (const wt of summary.worktrees) expect(existsSync(path.join(wt, 'src/calculator.js'))).toBe(true);
  });
});

describeIf(await needDocker())('trusted tool-chain demo (Docker sandbox)', () => {
  it('gives the same numbers with every test run inside a container', async () => {
    const summary = await demo('docker');
    expect(summary).toMatchObject({
      result: 'success',
      base_tests: { passed: 3, failed: 2 },
      after_tests: { passed: 5, failed: 0 },
      verify_tests: { passed: 5, failed: 0 },
    });
    const starts = readFileSync(summary.trace_path, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === 'tool_start')
      .map((e) => e.name);
    expect(starts[0]).toBe('build_environment');
  });
});
