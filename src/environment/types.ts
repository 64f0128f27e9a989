/** The one contract for running a test argv, whichever sandbox (local or Docker) runs it. */
import type { RunStatus, TestSummary } from '../testrunners/summary.js';

export interface RunRequest {
  argv: readonly string[];
  /** Host path of the worktree; the sandbox decides where it appears to the process. */
  worktree: string;
  timeoutMs: number;
  maxOutputBytes: number;
  signal?: AbortSignal;
}

export interface RunOutcome {
  exit_code: number | null;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
  duration_ms: number;
  /** passed: exit 0; failed: non-zero exit; timeout: killed by the clock; error: could not run. */
  status: RunStatus;
  summary: TestSummary | null;
  /** Free-form detail when status is error (e.g. OOM-killed, image missing). */
  detail?: string;
  /**
   * Set (with status error) when the run changed what it must never change: the worktree's `.git` or
   * the repository it leads to. The sandbox can no longer be trusted; callers stop the run.
   */
  isolation_violation?: string;
  /** Set (with status error) when the engine went away: no test result, and the run cannot go on. */
  engine_gone?: boolean;
}

export interface Sandbox {
  readonly kind: 'local' | 'docker';
  /** Human-readable description for traces (image id, limits). */
  describe(): Record<string, unknown>;
  /** false when the sandbox can no longer run anything: its Docker image is gone (engine restart, cleanup). */
  available(): Promise<boolean>;
  run(req: RunRequest): Promise<RunOutcome>;
}

export interface BuildResult {
  success: boolean;
  image_id: string | null;
  image_tag: string | null;
  cache_hit: boolean;
  duration_ms: number;
  /** Build network settings the builder applied (never their values: a proxy URL may hold credentials). */
  network: { proxy: boolean; ca: boolean };
  /** Compact log: status, first/last lines and the lines that look like errors. */
  log: BuildLog;
  /** Of a successful build: engine and deprecation warnings the package tools printed (npm EBADENGINE…). */
  warnings: string[];
  /** Of a successful build: the Dockerfile's steps (numbered as written) the engine's layer cache answered. */
  cached_steps: number[];
  error: string | null;
  /** Set when the build failed because the engine could not be reached: no fault of the Dockerfile. */
  engine_gone?: boolean;
}

export interface BuildLog {
  exit_status: 'ok' | 'failed' | 'timeout';
  head: string[];
  tail: string[];
  error_lines: string[];
  total_lines: number;
  truncated: boolean;
}

export interface BuildOptions {
  dockerfile: string;
  worktree: string;
  runId: string;
  noCache?: boolean;
  signal?: AbortSignal;
  /** Each Dockerfile step as the engine starts it (`Step 3/7 : RUN npm ci`, numbered as the model wrote them). */
  onStep?: (step: string) => void;
}

export interface EnvironmentBuilder {
  /** Builds (or reuses from cache) an image from a Dockerfile text and a snapshot of the worktree. */
  build(opts: BuildOptions): Promise<BuildResult>;
  /** A sandbox that runs each argv in a fresh container of the given image (the judge's cells), labelled with the run. */
  sandboxFor(imageId: string, runId: string): Sandbox;
  /**
   * The run's sandbox for its tool calls: one container of the image kept for the run (each call an exec
   * in it), replacing the run's previous one; removed when the run releases the builder.
   */
  runSandboxFor(imageId: string, runId: string): Sandbox;
  /** Base images available locally, as the model is told (language images first, with their runtime version). */
  localBaseImages(): Promise<string[]>;
}

/**
 * Makes the sandboxes runs test in: on the host (trusted repositories only), or in containers of a
 * built image, labelled with the run that uses them (the engine sweep ends a finished run's containers).
 */
export interface SandboxFactory {
  local(): Sandbox;
  container(imageId: string, runId: string): Sandbox;
}
