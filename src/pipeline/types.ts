import type { Config } from '../config/config.js';
import type { RunOutcome } from '../environment/types.js';
import type { SkippedFile } from '../patch/types.js';
import type { TestRecord } from '../tools/registry.js';

/** How the agent is driven: a real OpenAI-compatible model, a scripted replay, or a person at a prompt. */
export type ModelSpec =
  | { kind: 'openai' } // provider/name/key/base URL from Config['model']
  | { kind: 'scripted'; scriptPath: string }
  | { kind: 'url'; baseUrl: string; name: string; apiKey?: string } // any OpenAI-compatible server (scripted server in tests)
  | { kind: 'human'; input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream };

export interface IssueText {
  title: string;
  body: string;
  number?: number;
  /** A revision of the app's pull request: what it already changed and what maintainers asked for. */
  revision?: string;
}

export interface RepairOptions {
  config: Config;
  remote: string; // local path or URL of the repository
  baseCommit: string; // any revision; resolved to a full SHA
  issue: IssueText;
  testArgv: string[];
  model: ModelSpec;
  sandbox: 'docker' | 'local';
  /** Path patterns (src/tools/path-patterns.ts) the agent's tools refuse to change. */
  protectedPaths?: string[];
  /** A maintainer-provided Dockerfile used instead of asking the model to write one. */
  dockerfile?: string;
  runId?: string;
  budgets?: Partial<Config['budgets']>;
  signal?: AbortSignal;
  /** Progress callback (step n, tokens used, last test status) for status comments. */
  onProgress?: (p: RepairProgress) => void;
  keepWorktree?: boolean;
}

export interface RepairProgress {
  phase: 'preparing_workspace' | 'building_environment' | 'working' | 'done';
  step: number;
  tokens_used: number;
  token_budget: number;
  last_test: RunOutcome['status'] | null;
  /** While an image builds: the step it is at and the time since the build's first step. */
  build?: { step: string; elapsed_ms: number };
}

export type StopReason =
  | 'completed'
  | 'token_budget'
  | 'request_budget'
  | 'tool_budget'
  | 'time_budget'
  | 'no_edit_stop'
  | 'loop_detected'
  | 'format_error'
  | 'model_error'
  | 'cancelled'
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
