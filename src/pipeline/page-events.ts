import type { Logger } from 'probot';
import type { StatusState } from '../publish/status.js';
import { RunEventLog } from '../store/run-events.js';
import type { RunStore } from '../store/store.js';
import type { TraceEvent } from '../trace/trace.js';
import type { VerificationReport } from '../verify/types.js';
import type { RepairResult } from '../agent/types.js';

/** Test results kept per judge cell on the run page (a suite of thousands is summed up by its counts). */
const CELL_RESULTS_KEPT = 200;

/**
 * What a run page (src/web) reads of a run, written to the run store as the run goes, by whichever
 * process runs it: its trace events, its status changes, its repair's outcome and the judge's report.
 */
export class PageEvents {
  private readonly log: RunEventLog;
  /** The last status recorded per run: progress repeats the phase at every step. */
  private readonly last = new Map<string, string>();

  constructor(store: Pick<RunStore, 'appendEvents'>, logger?: Pick<Logger, 'warn'>) {
    this.log = new RunEventLog(store, (err, run) =>
      logger?.warn({ err, run }, 'could not record run events for the run page'),
    );
  }

  /** The trace's sink for run `runId`. */
  trace(runId: string): (ev: TraceEvent) => void {
    return (ev) => this.log.append(runId, ev.type, ev, ev.ts);
  }

  /** A status the status comment shows; recorded when its phase or line changed. */
  status(runId: string, s: StatusState): void {
    const key = `${s.phase}\n${s.detail ?? ''}`;
    if (this.last.get(runId) === key) return;
    this.last.set(runId, key);
    this.log.append(runId, 'status', { phase: s.phase, ...(s.detail ? { detail: s.detail } : {}) });
  }

  repaired(runId: string, r: RepairResult): void {
    this.log.append(runId, 'repair_result', {
      stop_reason: r.stop_reason,
      summary: r.summary,
      patch: r.patch,
      dockerfile: r.dockerfile,
      tokens: r.tokens,
      requests: r.requests,
      tool_calls: r.tool_calls,
      duration_ms: r.duration_ms,
      phases_ms: r.phases_ms,
      model_name: r.model_name,
      error: r.error,
    });
  }

  verified(runId: string, report: VerificationReport): void {
    const cells = report.cells.map((c) => ({ ...c, results: c.results.slice(0, CELL_RESULTS_KEPT) }));
    this.log.append(runId, 'verification', { report: { ...report, cells, commands: [] } });
  }

  /** The run is over: its status is no longer compared. */
  forget(runId: string): void {
    this.last.delete(runId);
  }

  flushed(): Promise<void> {
    return this.log.flushed();
  }
}
