import { z } from 'zod';
import type { Config } from '../config/config.js';
import { SUITE_FACTOR, testLimitMs } from '../environment/time-limits.js';
import { WRITABLE_ENV } from '../environment/docker.js';
import { stripAnsi } from '../testrunners/output.js';
import type { RunOutcome } from '../environment/types.js';
import { filesystemFull, worktreeOverLimits } from '../workspace/tree.js';
import { fail, ok, type ToolContext, type ToolDefinition, type ToolResult } from './types.js';

const MAX_SCRIPT_CHARS = 8000;

/**
 * A run's `timeout` argument. Its maximum is the real one: the operator's ceiling (a repository's lower
 * one); the default is the current limit, derived from the measured suite (see testLimitMs).
 */
export function timeoutArg(limits: Config['limits'], what: string) {
  const max = Math.floor(limits.maxTestTimeoutMs / 1000);
  const floor = Math.floor(Math.min(limits.minTestTimeoutMs, limits.maxTestTimeoutMs) / 1000);
  return z
    .int()
    .min(1)
    .max(max)
    .optional()
    .describe(
      `Seconds before the ${what} is killed, at most ${max}. Default: ${max} until a full default run measures ` +
        `the suite, then ${SUITE_FACTOR} × its time (at least ${floor} s); results give it as \`time_limit_s\``,
    );
}

/** Output of a write to the read-only root (Node's recursive mkdir reports ENOENT there, not EROFS). */
const READ_ONLY = /\bEROFS\b|read-only file system|ENOENT[^\n]*mkdir '\/(?!workspace\/|tmp\/)/i;

/** Says so when a run failed writing outside the writable places, or null. */
export function readOnlyNote(o: Pick<RunOutcome, 'stdout' | 'stderr'>): { note: string } | null {
  if (!READ_ONLY.test(`${o.stdout}\n${o.stderr}`)) return null;
  return {
    note:
      "Something wrote to the container's read-only root: at test time only /workspace (the repository) and " +
      `/tmp (${WRITABLE_ENV.join(', ')}) are writable; create what must exist elsewhere in the image (Dockerfile).`,
  };
}

/** The limit of a run whose call names none. */
export const currentLimitS = (ctx: ToolContext) => Math.floor(testLimitMs(ctx.limits, ctx.suiteMs) / 1000);

const RunCommandArgs = (limits: Config['limits']) =>
  z
    .strictObject({
      argv: z
        .array(z.string().max(4000))
        .min(1)
        .max(100)
        .optional()
        .describe('The command as an argv, run without a shell, e.g. ["python3", "repro.py"]'),
      script: z
        .string()
        .min(1)
        .max(MAX_SCRIPT_CHARS)
        .optional()
        .describe('A short shell script, run as /bin/sh -c <script>'),
      timeout: timeoutArg(limits, 'command'),
    })
    .refine((a) => (a.argv === undefined) !== (a.script === undefined), 'give exactly one of argv or script');

/**
 * The result of one sandbox run (run_tests, run_command) as a tool result: expected outcomes are
 * results; an isolation breach (`isolation_lost`), a worktree grown past a limit (`disk_limit`) and a
 * full disk (`infra_error`) are fatal, checked here so that no tool that runs code in the worktree can skip them.
 */
export async function sandboxResult<T>(
  ctx: ToolContext,
  o: RunOutcome,
  r: { what: string; timeoutS: number; data: T; truncated: boolean },
): Promise<ToolResult<T>> {
  // Code that fills the disk ends the run here, before anything copies the worktree (export, judge).
  const over = await worktreeOverLimits(ctx.worktree, ctx.limits);
  if (over) return fail('disk_limit', `${over} during the ${r.what}: the run stops`, r.data, true);
  // The host's disk, not the model's work: an infrastructure error.
  const full = await filesystemFull(ctx.worktree);
  if (full) return fail('infra_error', `${full} after the ${r.what}: the run stops`, r.data, true);
  switch (o.status) {
    case 'timeout':
      return fail('timeout', `the ${r.what} ran out of time: killed after ${r.timeoutS} s`, r.data);
    case 'cancelled':
      return fail('cancelled', 'the run was cancelled', r.data);
    case 'error':
      if (o.engine_gone)
        return fail(
          'infra_error',
          `the Docker engine went away during the ${r.what}: ${o.detail}`,
          r.data,
          true,
        );
      if (o.isolation_violation)
        return fail('isolation_lost', `sandbox isolation violated: ${o.isolation_violation}`, r.data);
      return fail('sandbox_error', `the ${r.what} could not run: ${o.detail ?? 'unknown error'}`, r.data);
    default:
      return ok(r.data, r.truncated);
  }
}

/** What the model is told when its test image had to be rebuilt before a run. */
export interface EnvironmentRebuilt {
  reason: string;
  image_id: string;
  cache_hit: boolean;
  duration_ms: number;
}

/**
 * Makes sure the sandbox can run. An image that disappeared under a live run (engine restart, a cleanup)
 * is rebuilt from the recorded Dockerfile with the same builder, and the model is told so; it never
 * sees the engine's `No such image`.
 */
export async function ensureSandbox(
  ctx: ToolContext,
): Promise<{ ok: true; rebuilt: EnvironmentRebuilt | null } | { ok: false; result: ToolResult }> {
  if (!ctx.sandbox || (await ctx.sandbox.available())) return { ok: true, rebuilt: null };
  const reason = 'the test image was removed (engine restart or cleanup)';
  if (!ctx.builder || !ctx.environment)
    return {
      ok: false,
      result: fail('sandbox_error', `${reason}; call build_environment to build it again`),
    };
  const lost = ctx.environment.imageId;
  const build = await ctx.builder.build({
    dockerfile: ctx.environment.dockerfile,
    worktree: ctx.worktree,
    runId: ctx.runId,
    signal: ctx.signal,
  });
  ctx.trace.event('environment_rebuilt', {
    lost_image_id: lost,
    image_id: build.image_id,
    success: build.success,
    cache_hit: build.cache_hit,
    duration_ms: build.duration_ms,
    error: build.error,
  });
  if (!build.success || !build.image_id) {
    const error = `${reason} and rebuilding it from the recorded Dockerfile failed: ${build.error ?? 'build failed'}; call build_environment`;
    return { ok: false, result: fail('sandbox_error', error, { log: build.log }) };
  }
  ctx.sandbox = ctx.builder.runSandboxFor(build.image_id, ctx.runId);
  ctx.environment = { dockerfile: ctx.environment.dockerfile, imageId: build.image_id };
  return {
    ok: true,
    rebuilt: {
      reason: `${reason}; it was rebuilt from your Dockerfile`,
      image_id: build.image_id,
      cache_hit: build.cache_hit,
      duration_ms: build.duration_ms,
    },
  };
}

/** Where run_command may run: the test container; the host (local sandbox) only when the operator allows it. */
function refusal(ctx: ToolContext): ToolResult | null {
  if (!ctx.sandbox)
    return fail('no_environment', 'No test environment yet: call build_environment with a Dockerfile first.');
  if (ctx.sandbox.kind === 'local' && !ctx.limits.runCommandLocal)
    return fail(
      'not_allowed',
      'run_command is off in this run: its sandbox is the host (set AGENTICFIX_RUN_COMMAND_LOCAL to allow it)',
    );
  return null;
}

export const runCommand: ToolDefinition<ReturnType<typeof RunCommandArgs>> = {
  name: 'run_command',
  description:
    "Run a command (argv) or a short /bin/sh script in run_tests' environment (repository as working " +
    'directory, no network, not root, timeout, capped output): for reproductions and quick checks. ' +
    'Returns status, exit code, stdout and stderr.',
  args: RunCommandArgs,
  mutates: false,
  async run(ctx, args) {
    const refused = refusal(ctx);
    if (refused) return refused;
    const ready = await ensureSandbox(ctx);
    if (!ready.ok) return ready.result;
    const argv = args.argv ?? ['/bin/sh', '-c', args.script!];
    const timeoutS = args.timeout ?? currentLimitS(ctx);
    const o = await ctx.sandbox!.run({
      argv,
      worktree: ctx.worktree,
      timeoutMs: timeoutS * 1000,
      maxOutputBytes: ctx.limits.maxOutputBytes,
      signal: ctx.signal,
    });
    const data = {
      ...(ready.rebuilt ? { environment_rebuilt: ready.rebuilt } : {}),
      command: argv,
      status: o.status,
      exit_code: o.exit_code,
      duration_ms: o.duration_ms,
      time_limit_s: timeoutS,
      ...readOnlyNote(o),
      stdout: stripAnsi(o.stdout),
      stderr: stripAnsi(o.stderr),
      ...(o.detail ? { detail: o.detail } : {}),
    };
    const truncated = o.stdout_truncated || o.stderr_truncated;
    return sandboxResult(ctx, o, { what: 'command', timeoutS, data, truncated });
  },
};
