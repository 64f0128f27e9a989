import type { Probot } from 'probot';
import type { GitHub } from '../publish/github.js';
import type { HandlerDeps } from './delivery.js';
import { EVENTS, eventTime, isHandled, type EventRow } from './events.js';
import type { Intake } from './intake.js';

/**
 * Webhook handlers. The server records each delivery the app may act on (once: a redelivered or
 * replayed webhook never acts twice) and answers before anything else; then the delivery's payload is
 * validated by its event's schema, and a handler that wants it gets it through the intake. The intake
 * checks permission, pins the base commit and enqueues; the work itself happens in the queue. A
 * delivery stays recorded with its payload until its intake is done, so one acknowledged just before a
 * crash is taken in at the next start.
 */

export interface AppDeps extends HandlerDeps {
  intake: Intake;
}

/** The installation client for a delivery's installation (from the webhook context, or after a restart). */
type Auth = (installationId: number) => Promise<GitHub>;

export function createApp(deps: AppDeps) {
  const { config, store, intake } = deps;

  /**
   * Validates a recorded delivery and hands it to the intake; one that asks nothing of the app (a bot, a
   * comment without a command, a payload of another shape) is marked done at once.
   */
  async function receive(
    id: string,
    event: string,
    payload: unknown,
    auth: Auth,
    log: Probot['log'],
    resumed = false,
  ) {
    const ignore = async (why?: unknown) => {
      if (why) log.warn({ err: why, delivery: id, event }, 'unexpected payload');
      await store.finishDelivery(id);
    };
    if (!isHandled(event)) return ignore(new Error(`not a handled event: ${event}`));
    const row = EVENTS[event] as EventRow<unknown>;
    // Deliveries are pruned after AGENTICFIX_DELIVERY_MAX_AGE_D: an older event may be a replay of one.
    if (row.time) {
      const at = eventTime(event, payload);
      if (at === null || at < Date.now() - config.app.retention.deliveryMaxAgeMs) {
        log.warn({ delivery: id, event, event_time: at }, 'refused: event older than the delivery retention');
        return ignore();
      }
    }
    const parsed = row.schema.safeParse(payload);
    if (!parsed.success) return ignore(parsed.error);
    if (!row.wants(parsed.data, config)) return ignore();
    const p = parsed.data as { installation: { id: number } };
    return intake.run(id, async () =>
      row.handle({ id, payload: p, gh: await auth(p.installation.id), log, deps, resumed }),
    );
  }

  return {
    /** The Probot app function: Probot routes each recorded delivery here after it was answered. */
    register(app: Probot): void {
      for (const [event, { action }] of Object.entries(EVENTS))
        app.on(`${event}.${action}` as 'issues.labeled', async (context) =>
          receive(context.id, event, context.payload, async () => context.octokit as GitHub, app.log),
        );
    },
    /** Takes in the deliveries a previous process acknowledged but did not finish. */
    async resume(auth: Auth, log: Probot['log']): Promise<number> {
      const pending = await store.pendingDeliveries();
      for (const d of pending)
        receive(d.id, d.event, d.payload, auth, log, true).catch((err: unknown) =>
          log.error({ err, delivery: d.id }, 'could not take in a delivery'),
        );
      return pending.length;
    },
  };
}
