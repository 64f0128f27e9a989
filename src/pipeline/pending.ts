import { z } from 'zod';
import { capMiddle } from '../trace/cap.js';
import type { RunRecord, RunUpdate } from '../store/store.js';
import { VerificationReportSchema } from '../verify/types.js';
import type { RepairResult } from '../agent/types.js';
import { BUDGETS, type Budgets } from './types.js';
import type { VerificationReport } from '../verify/types.js';

/**
 * A judged run whose publishing failed (GitHub down, a push refused for a moment) waits in state
 * `publish_pending` with what publishing needs, patch included, in its run record (`publish`): any
 * process serving the store (serve, distributed too, whichever machine ran the run) publishes it again
 * with back-off, never running the model. The repository config is read again at the run's base commit.
 */

/** Tries after the first failure; waits double from AGENTICFIX_PUBLISH_RETRY_BASE_S (60 s: about 17 h in all). */
export const PUBLISH_ATTEMPTS = 10;

export const PENDING_PUBLISH = z.strictObject({
  // Written by this app from the RepairResult it just had (the patch is `patch`, below).
  result: z.custom<Omit<RepairResult, 'patch'>>(
    (v) =>
      typeof v === 'object' && v !== null && typeof (v as { patch_path?: unknown }).patch_path === 'string',
  ),
  patch: z.string(),
  report: VerificationReportSchema,
  budgets: BUDGETS,
  model_label: z.string(),
  default_branch: z.string(),
  remote: z.string(),
  dockerfile: z.string().nullable(),
  attempts: z.number().int().min(0),
  next_at: z.string(),
  /**
   * A revision (push-revision.ts): its verified commit, the pull request's head it was made on, and
   * the branch, stored before the push; publishing again finds the commit on the branch or pushes it.
   */
  revision: z.strictObject({ commit: z.string(), parent: z.string(), branch: z.string() }).optional(),
});
export type RevisionPush = NonNullable<PendingPublish['revision']>;
export type PendingPublish = z.infer<typeof PENDING_PUBLISH>;

export const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The run update that records the pending publication. */
export const pendingFields = (p: PendingPublish): RunUpdate => ({ publish: JSON.stringify(p) });

/** The pending publication with its patch, or a reason it cannot be read. */
export function readPending(
  run: RunRecord,
): { ok: true; pending: PendingPublish; result: RepairResult } | { ok: false; error: string } {
  try {
    const pending = PENDING_PUBLISH.parse(JSON.parse(run.publish ?? 'null'));
    return { ok: true, pending, result: { ...pending.result, patch: pending.patch } };
  } catch (err) {
    return { ok: false, error: `its publishing record is unreadable: ${(err as Error).message}` };
  }
}

/** A publication whose try failed: it waits (`publish_pending`) and is tried again after its back-off. */
export function publishLater(p: PendingPublish, err: unknown, retryBaseMs: number): RunUpdate {
  const attempts = p.attempts + 1;
  return {
    ...pendingFields({ ...p, attempts, next_at: nextTry(attempts, retryBaseMs) }),
    state: 'publish_pending',
    error: capMiddle(`publishing failed: ${message(err)}`),
  };
}

/** When the try after `attempts` failed ones is due. */
export const nextTry = (attempts: number, baseMs: number, now = Date.now()): string =>
  new Date(now + baseMs * 2 ** Math.max(0, attempts - 1)).toISOString();

/** What publishing a judged patch needs, as a run keeps it while publishing waits (pending.ts). */
export function pendingOf(
  /** The run's context (context.ts). */
  c: {
    budgets: Budgets;
    model: string;
    defaultBranch: string;
    remote: string;
    dockerfile?: string | undefined;
  },
  result: RepairResult,
  report: VerificationReport,
  attempts: number,
  next: Date,
): PendingPublish {
  const { patch, ...kept } = result;
  return {
    result: kept,
    patch,
    report,
    budgets: c.budgets,
    model_label: result.model_name ?? c.model,
    default_branch: c.defaultBranch,
    remote: c.remote,
    dockerfile: c.dockerfile ?? null,
    attempts,
    next_at: next.toISOString(),
  };
}
