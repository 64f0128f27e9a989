import type { RepoConfig } from '../config/repo-config.js';
import type { RunRecord } from '../store/store.js';

/**
 * The model attempt `n` (from 1) asks for: a rerun command's `model=` for every attempt, else the
 * repository's `models` in turn (attempt n: entry (n-1) mod length), else its `model`; null: the
 * operator's. A run of one attempt is attempt 1. Apart from attempts.ts: the run's context reads it too.
 */
export function attemptModel(
  n: number,
  run: Pick<RunRecord, 'model'>,
  rc: Pick<RepoConfig, 'model' | 'models'>,
): string | null {
  if (run.model !== null) return run.model;
  if (rc.models) return rc.models[(n - 1) % rc.models.length]!;
  return rc.model ?? null;
}

/** Every model a run's attempts may ask for (each must be priced under a cost limit). */
export const runModels = (
  run: Pick<RunRecord, 'model'>,
  rc: Pick<RepoConfig, 'model' | 'models'>,
): (string | null)[] =>
  run.model === null && rc.models ? [...new Set(rc.models)] : [attemptModel(1, run, rc)];
