import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { capMiddle, capStrings } from './cap.js';
import { Redactor } from './redact.js';

/** Characters kept from each end of every string of a trace event (observations are far smaller). */
export const EVENT_STRING_KEEP = 32 * 1024;

/** Raised when the trace cannot be written: a run must stop rather than continue without evidence. */
export class TraceError extends Error {}

export interface TraceEvent {
  ts: string;
  seq: number;
  type: string;
  [k: string]: unknown;
}

export interface Artifact {
  name: string;
  path: string;
  sha256: string;
  bytes: number;
}

/** result.json: written for every run, also on failure. */
export interface RunResult {
  run_id: string;
  stop_reason: string;
  success: boolean;
  started_at: string;
  finished_at: string;
  counts: Record<string, number>;
  artifacts: Artifact[];
  error?: string | null;
  [k: string]: unknown;
}

/**
 * The append-only record of a run: runs/<id>/events.jsonl (every event), state.json (latest state)
 * and result.json (the outcome). Everything passes through the redactor first.
 */
export class RunTrace {
  readonly dir: string;
  readonly eventsPath: string;
  readonly statePath: string;
  readonly resultPath: string;
  readonly redactor: Redactor;
  /** The first write that failed (a full disk): the record is incomplete from there on. */
  failure: TraceError | null = null;
  private seq = 0;

  constructor(
    readonly runId: string,
    runsDir: string,
    secrets: Iterable<string | undefined> = [],
    /** Each event as written (redacted), for the run store (RunEventLog). */
    private readonly onEvent?: (ev: TraceEvent) => void,
  ) {
    this.dir = path.join(runsDir, runId);
    this.eventsPath = path.join(this.dir, 'events.jsonl');
    this.statePath = path.join(this.dir, 'state.json');
    this.resultPath = path.join(this.dir, 'result.json');
    this.redactor = new Redactor(secrets);
    this.guard(() => mkdirSync(this.dir, { recursive: true }));
  }

  /**
   * Appends an event. Each string in it keeps its head and tail (EVENT_STRING_KEEP characters each) and
   * says how much was cut between them: a huge tool argument is never copied whole into the trace.
   */
  event(type: string, fields: Record<string, unknown> = {}): TraceEvent {
    const ev: TraceEvent = { ts: new Date().toISOString(), seq: ++this.seq, type, ...fields };
    // Redacted before the cut, so no secret is left half-matched at its edge.
    const safe = capStrings(this.redactor.value(ev), EVENT_STRING_KEEP) as TraceEvent;
    this.guard(() => appendFileSync(this.eventsPath, JSON.stringify(safe) + '\n'));
    this.onEvent?.(safe);
    return safe;
  }

  writeState(state: Record<string, unknown>): void {
    this.atomicWrite(this.statePath, state);
  }

  /** Records an artifact (a file in the run dir) with its SHA-256. */
  artifact(name: string, file: string): Artifact {
    const buf = this.guard(() => readFileSync(file));
    return { name, path: file, sha256: sha256(buf), bytes: buf.length };
  }

  /** Writes a file into the run dir (redacted) and returns it as an artifact. */
  writeArtifact(name: string, content: string): Artifact {
    const file = path.join(this.dir, name);
    this.guard(() => writeFileSync(file, this.redactor.text(content)));
    return this.artifact(name, file);
  }

  writeResult(result: RunResult): void {
    this.atomicWrite(this.resultPath, { ...result, error: result.error && capMiddle(result.error) });
  }

  readEvents(): TraceEvent[] {
    if (!existsSync(this.eventsPath)) return [];
    return readFileSync(this.eventsPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TraceEvent);
  }

  private atomicWrite(file: string, value: unknown): void {
    const tmp = `${file}.tmp`;
    this.guard(() => {
      writeFileSync(tmp, JSON.stringify(this.redactor.value(value), null, 2) + '\n');
      renameSync(tmp, file);
    });
  }

  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      const failure = new TraceError(`trace unwritable in ${this.dir}: ${(err as Error).message}`);
      this.failure ??= failure;
      throw failure;
    }
  }
}

export const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');
