import { z } from 'zod';
import { workspaceRevision } from '../patch/patch.js';
import { diskUsage } from '../workspace/usage.js';
import { fail, ok, type ToolDefinition } from './types.js';

const RunTestsArgs = z.strictObject({
  target: z
    .string()
    .min(1)
    .max(100)
    .default('default')
    .describe('Named test target (see the task description)'),
  timeout: z
    .int()
    .min(1)
    .max(24 * 3600)
    .optional()
    .describe('Seconds before the run is killed; at most the configured maximum, which is also the default'),
});

export const runTests: ToolDefinition<typeof RunTestsArgs> = {
  name: 'run_tests',
  description:
    "Run the repository's tests (a fixed command per target) in the test environment. Returns exit code, " +
    'status, a pass/fail summary when the runner prints one, stdout/stderr (capped) and the workspace ' +
    'revision that was tested.',
  args: RunTestsArgs,
  mutates: false,
  async run(ctx, args) {
    // Own keys only: `constructor` or `__proto__` must not resolve to something inherited.
    const argv = Object.hasOwn(ctx.testCommands, args.target) ? ctx.testCommands[args.target] : undefined;
    if (!argv) {
      const targets = Object.keys(ctx.testCommands).join(', ');
      return fail('invalid_arguments', `unknown test target "${args.target}"; targets: ${targets}`);
    }
    const maxSeconds = Math.floor(ctx.limits.maxTestTimeoutMs / 1000);
    if (args.timeout !== undefined && args.timeout > maxSeconds) {
      return fail('invalid_arguments', `timeout must be between 1 and ${maxSeconds} seconds`);
    }
    if (!ctx.sandbox) {
      return fail(
        'no_environment',
        'No test environment yet: call build_environment with a Dockerfile first.',
      );
    }
    // The revision is taken before the run: it names the content the tests saw.
    const wt = { path: ctx.worktree, gitDir: ctx.gitDir };
    const revision = await workspaceRevision(wt, ctx.baseCommit, {
      maxFileBytes: ctx.limits.maxPatchFileBytes,
    });
    const timeoutS = args.timeout ?? maxSeconds;
    const o = await ctx.sandbox.run({
      argv,
      worktree: ctx.worktree,
      timeoutMs: timeoutS * 1000,
      maxOutputBytes: ctx.limits.maxOutputBytes,
      signal: ctx.signal,
    });
    const data = {
      target: args.target,
      command: argv,
      status: o.status,
      exit_code: o.exit_code,
      duration_ms: o.duration_ms,
      summary: o.summary,
      stdout: o.stdout,
      stderr: o.stderr,
      revision,
      ...(o.detail ? { detail: o.detail } : {}),
    };
    const truncated = o.stdout_truncated || o.stderr_truncated;
    // Tests that fill the disk end the run here, before anything copies the worktree (export, judge).
    const max = ctx.limits.maxWorktreeBytes;
    if ((await diskUsage(ctx.worktree, max)) > max) {
      const mb = Math.round(max / 2 ** 20);
      const error = `the worktree grew past ${mb} MB (AGENTICFIX_MAX_WORKTREE_MB) during the tests: the run stops`;
      return fail('disk_limit', error, data, true);
    }
    switch (o.status) {
      case 'timeout':
        return fail('timeout', `tests did not finish within ${timeoutS} s and were killed`, data);
      case 'cancelled':
        return fail('cancelled', 'the run was cancelled', data);
      case 'error':
        // The registry makes this fatal: the run stops, and the trace and result say why.
        if (o.isolation_violation)
          return fail('isolation_lost', `sandbox isolation violated: ${o.isolation_violation}`, data);
        return fail('sandbox_error', `tests could not run: ${o.detail ?? 'unknown error'}`, data);
      default:
        return ok(data, truncated);
    }
  },
};
