import { z } from 'zod';
import type { Config } from '../config/config.js';
import type { RunOutcome } from '../environment/types.js';
import type { Parts } from '../verify/types.js';
import type { IssueText } from '../agent/types.js';
import type { TraceEvent } from '../trace/trace.js';

/** How the agent is driven: a real OpenAI-compatible model, a scripted replay, or a person at a prompt. */
export type ModelSpec =
  | { kind: 'openai' } // provider/name/key/base URL from Config['model']
  | { kind: 'url'; baseUrl: string; name: string; apiKey?: string } // any OpenAI-compatible server (scripted server in tests)
  | { kind: 'human'; input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream };

/** The process's parts (src/cli/compose.ts) are the judge's too: one builder leases a run's images. */
export interface RepairOptions extends Parts {
  config: Config;
  remote: string; // local path or URL of the repository
  baseCommit: string; // any revision; resolved to a full SHA
  issue: IssueText;
  testArgv: string[];
  model: ModelSpec;
  sandbox: 'docker' | 'local';
  /** Path patterns (src/config/path-patterns.ts) the agent's tools refuse to change. */
  protectedPaths?: string[];
  /** A maintainer-provided Dockerfile used instead of asking the model to write one. */
  dockerfile?: string;
  runId?: string;
  budgets?: Partial<Config['budgets']>;
  signal?: AbortSignal;
  /** Each trace event as written (the run store's copy for run pages). */
  onEvent?: (ev: TraceEvent) => void;
  /** Progress callback (step n, tokens used, last test status) for status comments. */
  onProgress?: (p: RepairProgress) => void;
  keepWorktree?: boolean;
  /** Where to look for the repository's guidance for agents, first found wins (default GUIDANCE_FILES). */
  guidanceFiles?: readonly string[];
}

export interface RepairProgress {
  phase: 'preparing_workspace' | 'building_environment' | 'working' | 'done';
  step: number;
  tokens_used: number;
  token_budget: number;
  /** USD spent so far (null: the model has no price) and the run's cost limit (null: none). */
  cost_usd: number | null;
  cost_budget: number | null;
  /** Tokens and cost include estimates (a reply without usage). */
  estimated?: boolean;
  last_test: RunOutcome['status'] | null;
  /** While an image builds: the step it is at and the time since the build's first step. */
  build?: { step: string; elapsed_ms: number };
}

/** A run's budgets as the repository config and a rerun command leave them (shown on the PR, kept while publishing waits). */
export const BUDGETS = z.strictObject({
  tokens: z.number(),
  requests: z.number(),
  toolCalls: z.number(),
  timeMs: z.number(),
  // USD; null: no cost limit (and in what was kept before there were cost limits)
  costUsd: z.number().nullable().default(null),
});
export type Budgets = z.infer<typeof BUDGETS>;
