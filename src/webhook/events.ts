import { z } from 'zod';
import type { Config } from '../config/config.js';
import { mentions, parseCommand } from './commands.js';
import type { Delivery } from './delivery.js';
import { onComment } from './on-command.js';
import { onInstalled, onLabeled } from './on-issue.js';
import { onChecks, onMention, onReview } from './on-pull.js';
import {
  CHECKED,
  COMMENTED,
  INSTALLED,
  INSTALLED_REPOS,
  LABELED,
  REVIEW_COMMENTED,
  REVIEWED,
} from './payloads.js';
import { isBot } from './permission.js';

/** One event the app acts on. */
export interface EventRow<P> {
  /** Its one action; every other action of the event is answered and dropped. */
  action: string;
  /** The payload as far as the app reads it (also checked against GitHub's descriptions: contract.test). */
  schema: z.ZodType<P>;
  /**
   * When it happened by GitHub's clock, read from the signed body (a lax schema: it is read before the
   * payload is checked). Never later than the delivery's first receipt, so an event older than
   * AGENTICFIX_DELIVERY_MAX_AGE_D may be one whose record was pruned: such a delivery is refused. Null:
   * taken without a time.
   */
  time: z.ZodType<string> | null;
  /** Whether the payload asks anything of the app, read from it alone (no request): else it is done at once. */
  wants(payload: P, config: Config): boolean;
  handle(d: Delivery<P>): Promise<void>;
}

/** A row with its payload type taken from its schema. */
const row = <P>(r: EventRow<P>): EventRow<P> => r;
/** The body's `outer.inner` (`comment.created_at`), a time. */
const at = (outer: string, inner: string): z.ZodType<string> =>
  z.object({ [outer]: z.object({ [inner]: z.string() }) }).transform((p) => p[outer]![inner]!);

/** The webhook table: one row per event the app acts on. A new event is one row here. */
export const EVENTS = {
  // Labelling updates the issue: its `updated_at` is the label's time.
  issues: row({
    action: 'labeled',
    schema: LABELED,
    time: at('issue', 'updated_at'),
    wants: (p) => !isBot(p.sender) && !!p.label,
    handle: onLabeled,
  }),
  issue_comment: row({
    action: 'created',
    schema: COMMENTED,
    time: at('comment', 'created_at'),
    wants: (p) =>
      !isBot(p.sender) &&
      !(p.comment.user && isBot(p.comment.user)) &&
      parseCommand(p.comment.body).type !== 'none',
    handle: onComment,
  }),
  pull_request_review: row({
    action: 'submitted',
    schema: REVIEWED,
    // GitHub may send a null `submitted_at`: then the pull request's `updated_at`.
    time: z
      .object({
        review: z.object({ submitted_at: z.string().nullable() }),
        pull_request: z.object({ updated_at: z.string() }),
      })
      .transform((p) => p.review.submitted_at ?? p.pull_request.updated_at),
    wants: (p) => !isBot(p.sender) && p.review.state.toLowerCase() === 'changes_requested',
    handle: onReview,
  }),
  pull_request_review_comment: row({
    action: 'created',
    schema: REVIEW_COMMENTED,
    time: at('comment', 'created_at'),
    wants: (p, config) => !isBot(p.sender) && mentions(p.comment.body, config.app.mention),
    handle: onMention,
  }),
  // CI apps are bots: here the sender is not a person asking, the repository's checks are.
  check_suite: row({
    action: 'completed',
    schema: CHECKED,
    time: at('check_suite', 'updated_at'),
    wants: (p) => p.check_suite.pull_requests.length > 0,
    handle: onChecks,
  }),
  // Installation events reach every app without a subscription: the trigger label is made then. They
  // carry no event time: making a missing label again is harmless.
  installation: row({
    action: 'created',
    schema: INSTALLED,
    time: null,
    wants: () => true,
    handle: onInstalled,
  }),
  installation_repositories: row({
    action: 'added',
    schema: INSTALLED_REPOS,
    time: null,
    wants: () => true,
    handle: onInstalled,
  }),
};
export type HandledEvent = keyof typeof EVENTS;

export const isHandled = (event: string): event is HandledEvent => Object.hasOwn(EVENTS, event);

/** The event's time in ms since the epoch, or null when the payload has none. */
export function eventTime(event: HandledEvent, payload: unknown): number | null {
  const read = EVENTS[event].time?.safeParse(payload);
  const ms = read?.success ? Date.parse(read.data) : NaN;
  return Number.isNaN(ms) ? null : ms;
}

/**
 * Whether a delivery is one the app may act on, read from its raw body. GitHub puts `action` first, so
 * a look at the body's start answers without parsing it; any other layout is parsed.
 */
export function wanted(event: string, body: string): boolean {
  if (!isHandled(event)) return false;
  const action = EVENTS[event].action;
  const lead = /^\s*\{\s*"action"\s*:\s*"([a-z_]*)"/.exec(body.slice(0, 100));
  if (lead) return lead[1] === action;
  try {
    return (JSON.parse(body) as { action?: unknown }).action === action;
  } catch {
    return false;
  }
}
