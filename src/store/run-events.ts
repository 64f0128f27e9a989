import { capStrings } from '../trace/cap.js';
import { now, type NewRunEvent, type RunStore } from './store.js';

/** Characters kept from each end of one string of an event (an observation, a build log, a patch). */
export const EVENT_STRING_KEEP = 16_384;

/**
 * Appends runs' events to the store for the run pages, in order, without holding up the run: events
 * wait in memory while a write is in flight and go together in the next one. A store that fails loses
 * those events for the page (logged); the run's own record in its run directory is complete.
 */
export class RunEventLog {
  private readonly waiting = new Map<string, NewRunEvent[]>();
  private writing: Promise<void> | null = null;

  constructor(
    private readonly store: Pick<RunStore, 'appendEvents'>,
    private readonly onError: (err: unknown, runId: string) => void,
  ) {}

  /** `event` as the trace wrote it (`ts`, `seq` and `type` besides its fields), or new fields of `type`. */
  append(runId: string, type: string, fields: Record<string, unknown>, ts = now()): void {
    const { ts: _ts, seq: _seq, type: _type, ...body } = fields;
    const capped = capStrings(body, EVENT_STRING_KEEP) as Record<string, unknown>;
    const list = this.waiting.get(runId) ?? [];
    list.push({ ts, type, body: capped });
    this.waiting.set(runId, list);
    this.kick();
  }

  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = null;
      if (this.waiting.size > 0) this.kick(); // appended after the last batch was taken
    });
  }

  /** Resolves once every appended event is written (or its write failed). */
  async flushed(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    while (this.waiting.size > 0) {
      const batch = [...this.waiting];
      this.waiting.clear();
      for (const [runId, events] of batch)
        await this.store.appendEvents(runId, events).catch((err: unknown) => this.onError(err, runId));
    }
  }
}
