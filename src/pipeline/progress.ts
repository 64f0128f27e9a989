import type { StatusState } from '../publish/status.js';
import { code } from '../verify/untrusted.js';
import type { RepairProgress } from './types.js';

/** A build longer than this is named on the status comment (it would otherwise look like a stuck run). */
const LONG_BUILD_MS = 60_000;

/** What the status comment shows of a repair's progress. */
export function progressStatus(p: RepairProgress): StatusState {
  if (p.phase === 'done') return { phase: 'verifying' };
  return {
    phase: p.phase,
    step: p.step,
    tokensUsed: p.tokens_used,
    tokenBudget: p.token_budget,
    costUsd: p.cost_usd,
    costBudget: p.cost_budget,
    estimated: p.estimated,
    lastTest: p.last_test,
    ...(p.build && p.build.elapsed_ms >= LONG_BUILD_MS
      ? {
          detail: `Building the test environment for ${Math.round(p.build.elapsed_ms / 60_000)} min: ${code(p.build.step)}`,
        }
      : {}),
  };
}
