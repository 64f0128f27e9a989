import type { Probot } from 'probot';
import type { z } from 'zod';
import type { Config } from '../config/config.js';
import type { GitHub } from '../publish/github.js';
import { parseCommand } from './commands.js';
import type { Delivery, HandlerDeps } from './delivery.js';
import type { Intake } from './intake.js';
import { onComment } from './on-command.js';
import { onInstalled, onLabeled } from './on-issue.js';
import { onChecks, onMention, onReview } from './on-pull.js';
import { EVENT_TIME, eventTime, HANDLED, PAYLOADS, type HandledEvent } from './payloads.js';
import { isBot } from './permission.js';

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

/** Whether `body` mentions `handle` (`@agenticfix`) as a whole word, not inside another handle or an address. */
export function mentions(body: string, handle: string): boolean {
  const escaped = handle.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\w@.-])${escaped}(?![\\w-])`, 'i').test(body);
}

interface Handler<P> {
  /** Whether the payload asks anything of the app, read from it alone (no request): else it is done at once. */
  wants(payload: P, config: Config): boolean;
  handle(d: Delivery<P>): Promise<void>;
}
type Payload<E extends HandledEvent> = z.infer<(typeof PAYLOADS)[E]>;

/** Each handled event's handler; its schema is PAYLOADS[event], its one action HANDLED[event]. */
const HANDLERS: { [E in HandledEvent]: Handler<Payload<E>> } = {
  issues: { wants: (p) => !isBot(p.sender) && !!p.label, handle: onLabeled },
  issue_comment: {
    wants: (p) =>
      !isBot(p.sender) &&
      !(p.comment.user && isBot(p.comment.user)) &&
      parseCommand(p.comment.body).type !== 'none',
    handle: onComment,
  },
  pull_request_review: {
    wants: (p) => !isBot(p.sender) && p.review.state.toLowerCase() === 'changes_requested',
    handle: onReview,
  },
  pull_request_review_comment: {
    wants: (p, config) => !isBot(p.sender) && mentions(p.comment.body, config.app.mention),
    handle: onMention,
  },
  // CI apps are bots: here the sender is not a person asking, the repository's checks are.
  check_suite: { wants: (p) => p.check_suite.pull_requests.length > 0, handle: onChecks },
  // Installation events reach every app without a subscription: the trigger label is made then.
  installation: { wants: () => true, handle: onInstalled },
  installation_repositories: { wants: () => true, handle: onInstalled },
};

const isHandled = (event: string): event is HandledEvent => Object.hasOwn(HANDLERS, event);

/**
 * Whether a delivery is one the app may act on, read from its raw body. GitHub puts `action` first, so
 * a look at the body's start answers without parsing it; any other layout is parsed.
 */
export function wanted(event: string, body: string): boolean {
  const action = Object.hasOwn(HANDLED, event) ? HANDLED[event] : undefined;
  if (!action) return false;
  const lead = /^\s*\{\s*"action"\s*:\s*"([a-z_]*)"/.exec(body.slice(0, 100));
  if (lead) return lead[1] === action;
  try {
    return (JSON.parse(body) as { action?: unknown }).action === action;
  } catch {
    return false;
  }
}

export function createApp(deps: AppDeps) {
  const { config, store, intake } = deps;

  /**
   * Validates a recorded delivery and hands it to the intake; one that asks nothing of the app (a bot, a
   * comment without a command, a payload of another shape) is marked done at once.
   */
  async function receive(id: string, event: string, payload: unknown, auth: Auth, log: Probot['log']) {
    const ignore = async (why?: unknown) => {
      if (why) log.warn({ err: why, delivery: id, event }, 'unexpected payload');
      await store.finishDelivery(id);
    };
    if (!isHandled(event)) return ignore(new Error(`not a handled event: ${event}`));
    // Deliveries are pruned after AGENTICFIX_DELIVERY_MAX_AGE_D: an older event may be a replay of one.
    // Installation events carry no event time: making a missing label again is harmless.
    if (Object.hasOwn(EVENT_TIME, event)) {
      const at = eventTime(event, payload);
      if (at === null || at < Date.now() - config.app.retention.deliveryMaxAgeMs) {
        log.warn({ delivery: id, event, event_time: at }, 'refused: event older than the delivery retention');
        return ignore();
      }
    }
    const parsed = PAYLOADS[event].safeParse(payload);
    if (!parsed.success) return ignore(parsed.error);
    const handler = HANDLERS[event] as Handler<unknown>;
    if (!handler.wants(parsed.data, config)) return ignore();
    const p = parsed.data as { installation: { id: number } };
    return intake.run(id, async () =>
      handler.handle({ id, payload: p, gh: await auth(p.installation.id), log, deps }),
    );
  }

  return {
    /** The Probot app function: Probot routes each recorded delivery here after it was answered. */
    register(app: Probot): void {
      for (const [event, action] of Object.entries(HANDLED))
        app.on(`${event}.${action}` as 'issues.labeled', async (context) =>
          receive(context.id, event, context.payload, async () => context.octokit as GitHub, app.log),
        );
    },
    /** Takes in the deliveries a previous process acknowledged but did not finish. */
    async resume(auth: Auth, log: Probot['log']): Promise<number> {
      const pending = await store.pendingDeliveries();
      for (const d of pending)
        receive(d.id, d.event, d.payload, auth, log).catch((err: unknown) =>
          log.error({ err, delivery: d.id }, 'could not take in a delivery'),
        );
      return pending.length;
    },
  };
}
