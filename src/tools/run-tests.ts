import { z } from 'zod';
import { collapseRepeats, omitPassLines, shapeOutput } from '../testrunners/failures.js';
import { workspaceRevision } from '../patch/patch.js';
import type { Config } from '../config/config.js';
import { currentLimitS, ensureSandbox, readOnlyNote, sandboxResult, timeoutArg } from './run-command.js';
import { selectTests, TestSelector } from '../testrunners/selection.js';
import { fail, type ToolDefinition } from './types.js';

const RunTestsArgs = (limits: Config['limits']) =>
  z.strictObject({
    target: z
      .string()
      .min(1)
      .max(100)
      .default('default')
      .describe('Named test target (see the task description)'),
    timeout: timeoutArg(limits, 'run'),
    at: z
      .enum(['workspace', 'base'])
      .default('workspace')
      .describe(
        'Which code to test: your workspace, or the base revision (a clean checkout of the base commit, ' +
          'without your changes, in the same environment) to tell a failure that was already there from one you caused',
      ),
    tests: z
      .array(TestSelector)
      .min(1)
      .max(50)
      .optional()
      .describe(
        'Run only these tests: test ids (tests/test_a.py::test_x), files or directories, or test names ' +
          '(pytest -k, jest/vitest -t, mocha --grep, node --test-name-pattern, go test -run). Default: all.',
      ),
  });

export const runTests: ToolDefinition<ReturnType<typeof RunTestsArgs>> = {
  name: 'run_tests',
  description:
    "Run the repository's tests (a fixed command per target, optionally narrowed to `tests`) in the test " +
    "environment. Returns status, exit code, counts, each failing test's whole message (long ones cut " +
    'around the assertion), the rest of stdout/stderr (cut where long) and the revision tested.',
  args: RunTestsArgs,
  mutates: false,
  async run(ctx, args) {
    // Own keys only: `constructor` or `__proto__` must not resolve to something inherited.
    const command = Object.hasOwn(ctx.testCommands, args.target) ? ctx.testCommands[args.target] : undefined;
    if (!command) {
      const targets = Object.keys(ctx.testCommands).join(', ');
      return fail('invalid_arguments', `unknown test target "${args.target}"; targets: ${targets}`);
    }
    if (!ctx.sandbox) {
      return fail(
        'no_environment',
        'No test environment yet: call build_environment with a Dockerfile first.',
      );
    }
    if (args.at === 'base' && !ctx.baseTree)
      return fail('not_allowed', 'this run cannot check out the base revision: run_tests at base is off');
    const ready = await ensureSandbox(ctx);
    if (!ready.ok) return ready.result;
    const base = args.at === 'base' ? await ctx.baseTree!() : null;
    try {
      const tree = base?.path ?? ctx.worktree;
      const selection = args.tests ? selectTests(command, args.tests, tree) : null;
      if (selection && !selection.ok) return fail('invalid_arguments', selection.error);
      const argv = selection?.argv ?? command;
      // The revision is taken before the run: it names the content the tests saw.
      const wt = { path: ctx.worktree, gitDir: ctx.gitDir };
      const revision = base
        ? ctx.baseCommit
        : await workspaceRevision(wt, ctx.baseCommit, { maxFileBytes: ctx.limits.maxPatchFileBytes });
      const timeoutS = args.timeout ?? currentLimitS(ctx);
      const o = await ctx.sandbox.run({
        argv,
        worktree: tree,
        timeoutMs: timeoutS * 1000,
        maxOutputBytes: ctx.limits.maxOutputBytes,
        signal: ctx.signal,
      });
      // The first complete run of the whole default target measures the suite: later limits derive from it.
      const full =
        !base && !selection && args.target === 'default' && (o.status === 'passed' || o.status === 'failed');
      if (full && ctx.suiteMs == null) ctx.suiteMs = o.duration_ms;
      // What the model needs first leads: verdict, counts, failures; the output follows without them and
      // without pass lines.
      const shaped = shapeOutput(o.stdout, o.stderr);
      const stdout = omitPassLines(collapseRepeats(shaped.stdout).text);
      const stderr = omitPassLines(collapseRepeats(shaped.stderr).text);
      const data = {
        ...(ready.rebuilt ? { environment_rebuilt: ready.rebuilt } : {}),
        at: args.at,
        target: args.target,
        ...(args.tests ? { tests: args.tests } : {}),
        command: argv,
        status: o.status,
        exit_code: o.exit_code,
        summary: o.summary,
        failures: shaped.failures,
        revision,
        duration_ms: o.duration_ms,
        time_limit_s: timeoutS,
        ...readOnlyNote(o),
        stdout: stdout.text,
        stderr: stderr.text,
        // Only a real cut is truncation; passing-test lines left out are counted on their own.
        stdout_truncated: o.stdout_truncated,
        stderr_truncated: o.stderr_truncated,
        passing_lines_omitted: stdout.omitted + stderr.omitted,
        ...(o.detail ? { detail: o.detail } : {}),
      };
      const truncated = data.stdout_truncated || data.stderr_truncated;
      return await sandboxResult(ctx, o, { what: 'tests', timeoutS, data, truncated });
    } finally {
      await base?.release();
    }
  },
};
