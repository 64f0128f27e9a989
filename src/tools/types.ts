import { z } from 'zod';
import type { Config } from '../config/config.js';
import type { EnvironmentBuilder, Sandbox } from '../environment/types.js';
import type { RunTrace } from '../trace/trace.js';

/** Every tool returns this envelope. Expected failures are results; only `fatal` stops a run. */
export interface ToolResult<T = unknown> {
  success: boolean;
  data: T | null;
  error_code: ToolErrorCode | null;
  error: string | null;
  truncated: boolean;
  fatal: boolean;
}

export type ToolErrorCode =
  | 'unknown_tool'
  | 'invalid_arguments'
  | 'path_outside_workspace'
  | 'path_forbidden'
  | 'not_found'
  | 'is_directory'
  | 'not_a_file'
  | 'too_large'
  | 'binary_file'
  | 'already_exists'
  | 'no_match'
  | 'multiple_matches'
  | 'stale_version'
  | 'no_op'
  | 'no_environment'
  | 'build_failed'
  | 'timeout'
  | 'sandbox_error'
  | 'not_allowed'
  | 'cancelled'
  | 'internal_error'
  | 'isolation_lost'
  | 'disk_limit'
  | 'infra_error'; // the engine went away (fatal)

export const ok = <T>(data: T, truncated = false): ToolResult<T> => ({
  success: true,
  data,
  error_code: null,
  error: null,
  truncated,
  fatal: false,
});

export const fail = <T = unknown>(
  error_code: ToolErrorCode,
  error: string,
  data: T | null = null,
  fatal = false,
): ToolResult<T> => ({ success: false, data, error_code, error, truncated: false, fatal });

/**
 * What binds the tools to one run. Held by the host; tool arguments can never replace it.
 * `sandbox` is null until an environment exists (Docker runs) or is the local sandbox (demo).
 */
export interface ToolContext {
  readonly runId: string;
  readonly worktree: string;
  /** The worktree's repository (its admin dir in the mirror): host git is always pointed here, never at `.git`. */
  readonly gitDir: string;
  readonly baseCommit: string;
  readonly limits: Config['limits'];
  /** argv per named test target; `default` must exist. Never a free shell. */
  readonly testCommands: Readonly<Record<string, readonly string[]>>;
  /** Path patterns (path-patterns.ts) the agent must never change. */
  readonly protectedPaths?: readonly string[];
  /** Where run artifacts go (runs/<id>), outside the worktree. */
  readonly runDir: string;
  sandbox: Sandbox | null;
  /** The environment the model built last (Dockerfile text + image); the judge rebuilds it from scratch. */
  environment: { dockerfile: string; imageId: string } | null;
  /** Present when the model may build its own environment (Docker). */
  readonly builder: EnvironmentBuilder | null;
  readonly trace: RunTrace;
  readonly signal?: AbortSignal;
  /** Told each step of a build the model asked for (progress for the CLI and the status comment). */
  readonly onBuildStep?: (step: string) => void;
  /** Told when the model's build starts (true) and ends (false): its time is the environment's, not the agent's. */
  readonly onBuilding?: (building: boolean) => void;
  /** Wall time of the first full run of the default test target (null until then): later limits derive from it. */
  suiteMs?: number | null;
  /**
   * A fresh checkout of the base commit, made from the mirror (never from the agent's worktree), for
   * run_tests at the base revision; `release` removes it. Absent: the run cannot test the base.
   */
  readonly baseTree?: () => Promise<{ path: string; release: () => Promise<void> }>;
}

/** A tool's arguments schema for a run with these limits. */
export const argsSchema = (tool: ToolDefinition, limits: Config['limits']): z.ZodType =>
  typeof tool.args === 'function' ? tool.args(limits) : tool.args;

export interface ToolDefinition<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  /** The arguments' schema; a function of the run's limits where a bound comes from them (a timeout's maximum). */
  args: S | ((limits: Config['limits']) => S);
  /** true if the tool may change files in the worktree (used for stale test results and no-edit detection). */
  mutates: boolean;
  run(ctx: ToolContext, args: z.infer<S>): Promise<ToolResult>;
}

/** `z.int()`'s own bounds: no limit of ours, and ~30 characters each that every request would carry. */
const SAFE_INT = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/**
 * A tool's parameters as JSON Schema for chat-completions: the arguments the tool accepts, without
 * `$schema` and without the safe-integer bounds zod adds to every integer.
 */
export function toolParameters(args: z.ZodType): Record<string, unknown> {
  const { $schema: _, ...schema } = z.toJSONSchema(args, { io: 'input' }) as Record<string, unknown>;
  return JSON.parse(JSON.stringify(schema), (k, v: unknown) =>
    (k === 'maximum' || k === 'minimum') && SAFE_INT.has(v as number) ? undefined : v,
  ) as Record<string, unknown>;
}

/** JSON-Schema description of one tool, in the shape chat-completions expects. */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** The model's whole interface to the repository. Calls run one at a time. */
export interface ToolRegistry {
  readonly context: ToolContext;
  names(): string[];
  /** Whether the tool may change files (its `mutates`); false for an unknown name. */
  mutates(name: string): boolean;
  schemas(): ToolSchema[];
  /** Validates args against the tool's strict schema, runs it, traces start/end; never throws for expected failures. */
  call(name: string, args: unknown): Promise<ToolResult>;
  /** Whether any successful mutating call happened (used by no-edit detection). */
  hasEdits(): boolean;
}
