import { z } from 'zod';

/**
 * The webhook payloads the app acts on, as far as it reads them: shared by the handlers and the contract
 * test that checks them against GitHub's published examples.
 */

export const USER = z.object({ login: z.string(), type: z.string() });
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
  label: z.object({ name: z.string() }),
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
  comment: z.object({ id: z.number().int(), body: z.string(), user: USER }),
  issue: z.object({ number: z.number().int(), pull_request: z.unknown().optional() }),
});

export const REVIEWED = z.object({
  ...COMMON,
  review: z.object({ id: z.number().int(), state: z.string(), body: z.string().nullish(), user: USER }),
  pull_request: z.object({ number: z.number().int() }),
});

/** A review comment as the REST API and webhooks render it. */
export const GH_REVIEW_COMMENT = z.object({
  id: z.number().int(),
  body: z.string(),
  user: z.object({ login: z.string() }).nullable(),
  path: z.string(),
  line: z.number().int().nullish(), // null: outdated
  diff_hunk: z.string(),
  in_reply_to_id: z.number().int().nullish(),
  pull_request_review_id: z.number().int().nullish(),
});

export const REVIEW_COMMENTED = z.object({
  ...COMMON,
  comment: GH_REVIEW_COMMENT,
  pull_request: z.object({ number: z.number().int() }),
});

export const CHECKED = z.object({
  ...COMMON,
  check_suite: z.object({
    head_sha: z.string(),
    app: z.object({ slug: z.string() }).nullish(),
    pull_requests: z.array(z.object({ number: z.number().int() })),
  }),
});

/** The events (and their one action) the app acts on; every other delivery is answered and dropped. */
export const HANDLED: Record<string, string> = {
  issues: 'labeled',
  issue_comment: 'created',
  pull_request_review: 'submitted',
  pull_request_review_comment: 'created',
  check_suite: 'completed',
};
