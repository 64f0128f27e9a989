import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { VerificationReportSchema } from '../verify/types.js';
import type { RepairResult } from '../agent/types.js';

/**
 * A judged run whose publishing failed (GitHub down, a push refused for a moment) waits in state
 * `publish_pending` with what publishing needs in runs/<id>/publish.json: publishing is tried again
 * with back-off, never the model. The repository config is read again at the run's base commit.
 */

/** Tries after the first failure; waits double from AGENTICFIX_PUBLISH_RETRY_BASE_S (60 s: about 17 h in all). */
export const PUBLISH_ATTEMPTS = 10;

export const PENDING_PUBLISH = z.strictObject({
  // Written by this process from the RepairResult it just had (without the patch: it is in final.patch).
  result: z.custom<Omit<RepairResult, 'patch'>>(
    (v) =>
      typeof v === 'object' && v !== null && typeof (v as { patch_path?: unknown }).patch_path === 'string',
  ),
  report: VerificationReportSchema,
  budgets: z.record(z.string(), z.number()),
  model_label: z.string(),
  default_branch: z.string(),
  remote: z.string(),
  dockerfile: z.string().nullable(),
  attempts: z.number().int().min(0),
  next_at: z.string(),
});
export type PendingPublish = z.infer<typeof PENDING_PUBLISH>;

const fileOf = (runsDir: string, runId: string) => path.join(runsDir, runId, 'publish.json');

export function writePending(runsDir: string, runId: string, p: PendingPublish): void {
  writeFileSync(fileOf(runsDir, runId), `${JSON.stringify(p, null, 2)}\n`);
}

/** The pending publication with its patch, or a reason it cannot be read. */
export function readPending(
  runsDir: string,
  runId: string,
): { ok: true; pending: PendingPublish; result: RepairResult } | { ok: false; error: string } {
  try {
    const pending = PENDING_PUBLISH.parse(JSON.parse(readFileSync(fileOf(runsDir, runId), 'utf8')));
    const patch = readFileSync(pending.result.patch_path, 'utf8');
    return { ok: true, pending, result: { ...pending.result, patch } };
  } catch (err) {
    return { ok: false, error: `its publishing record is unreadable: ${(err as Error).message}` };
  }
}

export function removePending(runsDir: string, runId: string): void {
  rmSync(fileOf(runsDir, runId), { force: true });
}

/** When the try after `attempts` failed ones is due. */
export const nextTry = (attempts: number, baseMs: number, now = Date.now()): string =>
  new Date(now + baseMs * 2 ** Math.max(0, attempts - 1)).toISOString();
