import { z } from 'zod';
import { GH_REVIEW_COMMENT } from '../revision/feedback.js';

/**
 * The webhook payloads the app acts on, as far as it reads them: shared by the handlers and the contract
 * test that checks them against GitHub's published examples.
 */

// GitHub's user schema does not promise `type`; a deleted account's comments have no user at all.
export const USER = z.object({ login: z.string(), type: z.string().optional() });
export const COMMON = {
  repository: z.object({
    name: z.string(),
    owner: z.object({ login: z.string() }),
    default_branch: z.string(),
  }),
  sender: USER,
  installation: z.object({ id: z.number().int() }),
};
export const LABELED = z.object({
  ...COMMON,
  label: z.object({ name: z.string() }).optional(), // optional in GitHub's description
  // The issue as the maintainer labelled it: the run works on this snapshot, not on later edits.
  issue: z.object({
    number: z.number().int(),
    title: z.string(),
    body: z.string().nullish(),
    updated_at: z.string(),
  }),
});
export const COMMENTED = z.object({
  ...COMMON,
  comment: z.object({ id: z.number().int(), body: z.string(), user: USER.nullable() }),
  issue: z.object({ number: z.number().int(), pull_request: z.unknown().optional() }),
});

export const REVIEWED = z.object({
  ...COMMON,
  review: z.object({ id: z.number().int(), state: z.string(), body: z.string().nullish() }),
  pull_request: z.object({ number: z.number().int() }),
});

export const REVIEW_COMMENTED = z.object({
  ...COMMON,
  comment: GH_REVIEW_COMMENT,
  pull_request: z.object({ number: z.number().int() }),
});

export const CHECKED = z.object({
  ...COMMON,
  check_suite: z.object({
    id: z.number().int(),
    head_sha: z.string(),
    head_branch: z.string().nullable(), // null: a push to a fork
    // Three of GitHub's four check_suite.completed examples have an app without a slug.
    app: z.object({ slug: z.string().optional() }).nullish(),
    pull_requests: z.array(z.object({ number: z.number().int() })),
  }),
});

/** A repository as installation events list them. */
const INSTALLED_REPO = z.object({ name: z.string(), full_name: z.string() });
/** The app installed on an account: `repositories` lists those it may reach (absent in some of GitHub's examples). */
export const INSTALLED = z.object({
  installation: COMMON.installation,
  sender: USER,
  repositories: z.array(INSTALLED_REPO).optional(),
});
/** Repositories added to an installation. */
export const INSTALLED_REPOS = z.object({
  installation: COMMON.installation,
  sender: USER,
  repositories_added: z.array(INSTALLED_REPO),
});

/** The events (and their one action) the app acts on; every other delivery is answered and dropped. */
export const HANDLED: Readonly<Record<string, string>> = {
  issues: 'labeled',
  issue_comment: 'created',
  pull_request_review: 'submitted',
  pull_request_review_comment: 'created',
  check_suite: 'completed',
  // Installation events reach every app without a subscription: the trigger label is made then.
  installation: 'created',
  installation_repositories: 'added',
};

/**
 * When each handled event happened, by GitHub's clock, read from the signed body: the labelled issue's
 * `updated_at` (labelling updates it), the comment's `created_at`, the review's `submitted_at` (GitHub
 * may send null: then the pull request's `updated_at`), the check suite's `updated_at`. It is never later than the delivery's first receipt, so an event older
 * than AGENTICFIX_DELIVERY_MAX_AGE_D may be one whose record was pruned: such a delivery is refused.
 */
export const EVENT_TIME: Readonly<Record<string, z.ZodType<string>>> = {
  issues: z.object({ issue: z.object({ updated_at: z.string() }) }).transform((p) => p.issue.updated_at),
  issue_comment: z
    .object({ comment: z.object({ created_at: z.string() }) })
    .transform((p) => p.comment.created_at),
  pull_request_review: z
    .object({
      review: z.object({ submitted_at: z.string().nullable() }),
      pull_request: z.object({ updated_at: z.string() }),
    })
    .transform((p) => p.review.submitted_at ?? p.pull_request.updated_at),
  pull_request_review_comment: z
    .object({ comment: z.object({ created_at: z.string() }) })
    .transform((p) => p.comment.created_at),
  check_suite: z
    .object({ check_suite: z.object({ updated_at: z.string() }) })
    .transform((p) => p.check_suite.updated_at),
};

/** The event's time in ms since the epoch (EVENT_TIME), or null when the payload has none. */
export function eventTime(event: string, payload: unknown): number | null {
  const read = Object.hasOwn(EVENT_TIME, event) ? EVENT_TIME[event]!.safeParse(payload) : null;
  const at = read?.success ? Date.parse(read.data) : NaN;
  return Number.isNaN(at) ? null : at;
}

/** Each handled event's payload schema. */
export const PAYLOADS = {
  issues: LABELED,
  issue_comment: COMMENTED,
  pull_request_review: REVIEWED,
  pull_request_review_comment: REVIEW_COMMENTED,
  check_suite: CHECKED,
  installation: INSTALLED,
  installation_repositories: INSTALLED_REPOS,
} satisfies Record<keyof typeof HANDLED, z.ZodType>;
export type HandledEvent = keyof typeof PAYLOADS;
