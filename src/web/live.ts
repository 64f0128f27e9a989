import type { ServerResponse } from 'node:http';
import { isActive, type RunRecord, type RunStore } from '../store/store.js';

/**
 * The run pages' server-sent events (/runs/<id>/live): `change` when the run (or attempt `of`) has new
 * events, or the run another state or another attempt recorded; `end` once it is over. Each open stream
 * looks at the store every poll, so a person has at most MAX_LIVE_PER_PERSON open at once (a page holds
 * one; a few tabs fit): more were a way for one reader to keep serve and its store busy.
 */

export const MAX_LIVE_PER_PERSON = 8;
/** Events read per look (the page itself reads them; a stream only says that there are new ones). */
export const EVENTS_LIMIT = 100_000;
const KEEPALIVE_MS = 15_000;

export interface LiveOptions {
  store: RunStore;
  /** How often a stream's run is looked at in the store. */
  pollMs: number;
  headers: Record<string, string>;
  log?: { warn(o: object, msg: string): void };
}

export class LiveStreams {
  private readonly open = new Set<ServerResponse>();
  /** Streams open per GitHub login. */
  private readonly perPerson = new Map<string, number>();

  constructor(private readonly o: LiveOptions) {}

  /** Streams the run's changes to `res`; false (nothing written) when `login` has too many open. */
  start(res: ServerResponse, login: string, run: RunRecord, after: number, of = run.id): boolean {
    const held = this.perPerson.get(login) ?? 0;
    if (held >= MAX_LIVE_PER_PERSON) return false;
    this.perPerson.set(login, held + 1);
    const { store, pollMs, log } = this.o;
    res.writeHead(200, { ...this.o.headers, 'content-type': 'text/event-stream', connection: 'keep-alive' });
    res.write(': live\n\n');
    this.open.add(res);
    let seq = after;
    let state = run.state;
    let outcomes = run.attempts; // an attempt recorded: its page and its run's table change
    let quiet = 0;
    const timer = setInterval(() => {
      void (async () => {
        const [now, fresh] = await Promise.all([store.get(run.id), store.events(of, seq, EVENTS_LIMIT)]);
        if (fresh.length > 0 || now?.state !== state || now.attempts !== outcomes) {
          seq = fresh.at(-1)?.seq ?? seq;
          state = now?.state ?? state;
          outcomes = now?.attempts ?? outcomes;
          res.write(`event: change\ndata: ${JSON.stringify({ seq, state })}\n\n`);
          quiet = 0;
        } else if ((quiet += pollMs) >= KEEPALIVE_MS) {
          res.write(': keep-alive\n\n');
          quiet = 0;
        }
        // Over, and the last events written (the process running it flushes them before it records the end).
        if (!isActive(state) && fresh.length === 0) {
          res.write(`event: end\ndata: ${JSON.stringify({ seq, state })}\n\n`);
          res.end();
        }
      })().catch((err: unknown) => {
        log?.warn({ err, run: run.id }, 'live run stream failed');
        res.end();
      });
    }, pollMs);
    res.once('close', () => {
      clearInterval(timer);
      this.open.delete(res);
      const left = (this.perPerson.get(login) ?? 1) - 1;
      if (left > 0) this.perPerson.set(login, left);
      else this.perPerson.delete(login);
    });
    return true;
  }

  /** Ends every stream (the server cannot close while they are open). */
  close(): void {
    for (const res of this.open) res.end();
  }
}
