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
    conclusion: z.string().nullish(),
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
