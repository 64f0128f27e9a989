import { z } from 'zod';

/**
 * What a maintainer asked a revision to change, as it was when the revision was triggered: the run
 * works on this snapshot, never on later edits. All of it is untrusted text, like an issue.
 */

const REVIEW_COMMENT = z.strictObject({
  id: z.number().int(),
  path: z.string(),
  /** The new-side line on the pull request's head; null when the comment is outdated. */
  line: z.number().int().nullable(),
  diff_hunk: z.string(),
  body: z.string(),
  user: z.string(),
  outdated: z.boolean(),
  /** The thread was marked resolved on GitHub when the revision was triggered. */
  resolved: z.boolean(),
});
export type ReviewComment = z.infer<typeof REVIEW_COMMENT>;

const CHECK_RUN = z.strictObject({
  id: z.number().int(),
  name: z.string(),
  conclusion: z.string(),
  summary: z.string(),
  annotations: z.array(z.strictObject({ path: z.string(), line: z.number().int(), message: z.string() })),
  output_tail: z.string(),
});
export type CheckRun = z.infer<typeof CHECK_RUN>;

export const FEEDBACK = z.discriminatedUnion('kind', [
  // `/agenticfix revise <text>`: the rest of the first line and the lines after it.
  z.strictObject({ kind: z.literal('command'), user: z.string(), text: z.string() }),
  // A submitted review asking for changes, with its inline comments.
  z.strictObject({
    kind: z.literal('review'),
    user: z.string(),
    review_id: z.number().int(),
    body: z.string(),
    comments: z.array(REVIEW_COMMENT),
    /** The pull request's other review threads (their first comments), for context. */
    threads: z.array(REVIEW_COMMENT),
    /** Review comments left out because their authors lack write access (named in the evidence). */
    left_out: z.number().int().min(0).default(0),
  }),
  // A review comment mentioning the app; `comment.id` is its thread's first comment (where replies go).
  z.strictObject({ kind: z.literal('mention'), user: z.string(), comment: REVIEW_COMMENT }),
  // The failing runs of the check suite that completed on the pull request's head (`user`: its app).
  z.strictObject({
    kind: z.literal('checks'),
    user: z.string(),
    head_sha: z.string(),
    suite_id: z.number().int().optional(), // absent in runs recorded before suites were told apart
    runs: z.array(CHECK_RUN),
    /** The suite's runs not in `runs`: failing ones past the cap, or runs past the pages read. */
    left_out: z.number().int().min(0).default(0),
    /** Other failing runs on the same commit, never shown to the model: named in the evidence. */
    ignored: z.array(z.strictObject({ name: z.string(), app: z.string(), why: z.string() })).default([]),
    /** Runs on the commit not named in `ignored`: failing ones past the cap, or runs past the pages read. */
    ignored_more: z.number().int().min(0).default(0),
  }),
]);
export type Feedback = z.infer<typeof FEEDBACK>;
