/** What a repair is about, how the agent's loop can end and what a repair leaves: shared by the agent and the stages above it. */
import type { SkippedFile } from '../patch/types.js';
import type { TestRecord } from '../tools/registry.js';

export interface IssueText {
  title: string;
  body: string;
  number?: number;
  /** A revision of the app's pull request: what it already changed and what maintainers asked for. */
  revision?: string;
}

export type StopReason =
  | 'completed'
  | 'token_budget'
  | 'request_budget'
  | 'tool_budget'
  | 'time_budget'
  | 'cost_budget'
  | 'no_edit_stop'
  | 'loop_detected'
  | 'format_error'
  | 'model_error'
  | 'cancelled'
  | 'infra_error' // the engine went away: no fault of the model, and no result of its work stands
  | 'fatal';

export interface RepairResult {
  run_id: string;
  stop_reason: StopReason;
  base_commit: string; // full SHA
  patch: string; // final patch text ('' if none)
  patch_path: string; // runs/<id>/final.patch
  patch_skipped: SkippedFile[]; // left out of the patch: files over AGENTICFIX_MAX_PATCH_FILE_BYTES, nested repositories
  trace_path: string; // runs/<id>/events.jsonl
  result_path: string; // runs/<id>/result.json
  run_dir: string;
  dockerfile: string | null; // the environment's final Dockerfile (null for the local sandbox)
  image_id: string | null;
  summary: string | null; // the model's finish summary
  tokens: { prompt: number; completion: number; cached: number; total: number };
  /** What the model requests cost in USD; null when the model has no price (unknown, never 0). */
  cost_usd: number | null;
  requests: number;
  tool_calls: number;
  duration_ms: number;
  /** Wall time per phase (model_setup, workspace, environment, agent, patch_and_cleanup). */
  phases_ms: Record<string, number>;
  model_name: string | null; // as reported by the service
  /** Wall time of the first full run of the test command (null if none completed): the judge's limits derive from it. */
  suite_ms: number | null;
  prompt_hash: string;
  /** The agent's last run_tests (src/tools/registry.ts), null when it ran none. */
  last_test: TestRecord | null;
  worktree_path: string | null; // kept worktree (failed run or keepWorktree), else null
  error: string | null;
}
