import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { RunOutcome, Sandbox } from '../environment/types.js';
import { readBelow } from '../workspace/safe-read.js';
import { removeTree } from '../workspace/tree.js';
import {
  collectResults,
  crossCheck,
  instrumentArgv,
  REPORT_DIR,
  type InstrumentedCommand,
} from '../testrunners/reports/runner.js';
import { instrumentShell } from '../testrunners/reports/shell.js';
import type { ParsedResults, TestResult } from '../testrunners/reports/types.js';
import type { Cell } from './types.js';
import { stopwatch } from '../trace/phases.js';

export interface CellContext {
  sandbox: Sandbox;
  worktree: string;
  argv: readonly string[];
  /** A task row's command line with shell syntax: run through `sh -c` instead of `argv` (see instrumentShell). */
  shell?: string;
  timeoutMs: number;
  maxOutputBytes: number;
  /** The report is read only up to this size; a larger one counts as unreadable. */
  maxReportBytes: number;
  /** Re-runs when the first run has failures, to tell flaky tests from real failures. */
  reruns: number;
  /** Whether "no test collected" is acceptable (base tests of a repository that has none yet). */
  allowEmpty: boolean;
  signal?: AbortSignal;
}

interface OneRun {
  outcome: RunOutcome;
  parsed: ParsedResults;
  problem: string | null;
}

/** A cell that could not run at all (engine error, cancellation): the judge reports infra_error. */
export class CellInfraError extends Error {
  override name = 'CellInfraError';
}

/** The run changed the worktree's `.git`: the sandbox did not hold, no result of this judge can stand. */
export class CellIsolationError extends CellInfraError {
  override name = 'CellIsolationError';
}

const TAIL = 2000;

async function runOnce(ctx: CellContext, cmd: InstrumentedCommand): Promise<OneRun> {
  const { argv, reportFile, runner } = cmd;
  // The container runs as the worktree's owner or as nobody: the report directory must be writable by either.
  const dir = path.join(ctx.worktree, REPORT_DIR);
  await removeTree(dir); // what the tests left there: any depth, any mode
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o777);
  // The judge never rebuilds under its own feet: a vanished image would make the cells incomparable.
  if (!(await ctx.sandbox.available()))
    throw new CellInfraError(
      "the judge's test image was removed while it ran (engine restart or cleanup); run the verification again",
    );
  const outcome = await ctx.sandbox.run({
    argv,
    worktree: ctx.worktree,
    timeoutMs: ctx.timeoutMs,
    maxOutputBytes: ctx.maxOutputBytes,
    signal: ctx.signal,
  });
  if (outcome.isolation_violation) throw new CellIsolationError(outcome.isolation_violation);
  if (outcome.status === 'error' || outcome.status === 'cancelled')
    throw new CellInfraError(`test run ${outcome.status}: ${outcome.detail ?? 'no detail'}`);
  // The container wrote the report: it may have made it a link to a host file, or a FIFO.
  const readReport = (file: string | null | undefined) => {
    const read = file ? readBelow(ctx.worktree, file, ctx.maxReportBytes) : null;
    // A cut report would be partial evidence: it counts as unreadable.
    return read?.ok && !read.truncated && read.buf.length > 0 ? read.buf.toString('utf8') : null;
  };
  const report = readReport(reportFile) ?? readReport(cmd.stdoutFile);
  await removeTree(dir);
  const parsed = collectResults(runner, outcome.stdout, report);
  if (outcome.status === 'timeout')
    return { outcome, parsed, problem: `timed out after ${Math.round(ctx.timeoutMs / 1000)} s` };
  const check = crossCheck(parsed, outcome.exit_code);
  return { outcome, parsed, problem: check.ok || (check.empty && ctx.allowEmpty) ? null : check.problem };
}

/** Ids whose status differs between runs (or that some runs did not report). */
export function flakyIds(runs: readonly (readonly TestResult[])[]): string[] {
  const maps = runs.map((results) => new Map(results.map((r) => [r.id, r.status])));
  const ids = new Set(maps.flatMap((m) => [...m.keys()]));
  return [...ids].filter((id) => new Set(maps.map((m) => m.get(id) ?? 'missing')).size > 1).sort();
}

/**
 * Runs one cell: the instrumented test command in the cell's worktree, re-run up to `reruns`
 * times when anything failed. The first run's results stand; tests whose result changed are
 * listed as flaky. A suite judged by exit code alone whose exit code changed cannot be trusted.
 */
export async function runCell(
  spec: Pick<Cell, 'name' | 'source' | 'tests'>,
  ctx: CellContext,
): Promise<Cell> {
  const cmd = ctx.shell === undefined ? instrumentArgv(ctx.argv) : instrumentShell(ctx.shell);
  const elapsed = stopwatch();
  const first = await runOnce(ctx, cmd);
  const runs = [first];
  const anyFailure =
    first.outcome.exit_code !== 0 ||
    first.parsed.results.some((r) => r.status === 'failed' || r.status === 'error');
  if (anyFailure && first.outcome.status !== 'timeout') {
    for (let i = 0; i < ctx.reruns; i++) runs.push(await runOnce(ctx, cmd));
  }
  // A run that timed out or reported nothing has no results: that is its problem, never a flip of every test.
  const compared = runs.filter((r) => r.outcome.status !== 'timeout' && r.parsed.results.length > 0);
  const flaky =
    first.parsed.per_test && compared.length > 1 ? flakyIds(compared.map((r) => r.parsed.results)) : [];
  const exitCodes = [...new Set(runs.map((r) => r.outcome.exit_code))];
  const failed = runs.findIndex((r) => r.problem !== null);
  const problem =
    (failed < 0 ? null : `${failed > 0 ? `re-run ${failed}: ` : ''}${runs[failed]!.problem}`) ??
    (!first.parsed.per_test && exitCodes.length > 1
      ? `the suite's exit code changed across re-runs (${exitCodes.join(', ')})`
      : null);
  const results = first.parsed.results;
  const count = (s: TestResult['status']) => results.filter((r) => r.status === s).length;
  const o = first.outcome;
  return {
    ...spec,
    argv: cmd.argv,
    exit_code: o.exit_code,
    status: o.status,
    runs: runs.length,
    duration_ms: elapsed(),
    runner: cmd.runner,
    per_test: first.parsed.per_test,
    report_source: first.parsed.source,
    counts: {
      passed: count('passed'),
      failed: count('failed'),
      errors: count('error'),
      skipped: count('skipped'),
    },
    results,
    flaky,
    problem,
    output_tail: `${o.stdout}\n${o.stderr}`.trim().slice(-TAIL),
  };
}
