import { z } from 'zod';
import type { RunState, RunUpdate } from '../store/store.js';

/** Why a run's signal was aborted (`signal.reason`); it also travels between processes. */
export const STOP_REQUEST = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('superseded'), by: z.string() }),
  z.strictObject({ kind: z.literal('cancelled'), by: z.string() }),
  z.strictObject({ kind: z.literal('shutdown') }),
  // A draining worker's run that did not finish in time: back to the queue for another worker.
  z.strictObject({ kind: z.literal('handback') }),
  // The worker lost its hold on the run (Redis unreachable or restarted, or the worker blocked past its
  // lock): the queue may hand the run to another, so it stops here.
  z.strictObject({ kind: z.literal('lock_lost') }),
]);
export type StopRequest = z.infer<typeof STOP_REQUEST>;

/** What a run stopped by `stop` records. */
export function stoppedFields(stop: StopRequest): RunUpdate & { state: RunState } {
  switch (stop.kind) {
    case 'superseded':
      return { state: 'superseded', stop_reason: 'superseded', superseded_by: stop.by };
    case 'cancelled':
      return { state: 'cancelled', stop_reason: 'cancelled' };
    case 'shutdown':
    case 'handback': // where there is no queue to hand back to
      return { state: 'interrupted', stop_reason: 'shutdown' };
    case 'lock_lost':
      return {
        state: 'interrupted',
        stop_reason: 'interrupted',
        error:
          'its worker lost its hold on the run in the queue (Redis unreachable or restarted, or the worker blocked)',
      };
  }
}
