import { z } from 'zod';
import type { EnvironmentBuilder } from '../environment/types.js';
import type { RunStatus, TestSummary } from '../testrunners/summary.js';
import { TraceError } from '../trace/trace.js';
import { makeBuildEnvironmentTool } from './build-environment.js';
import { gitDiff } from './git-diff.js';
import { listFiles, readFile, searchCode } from './read-tools.js';
import { runCommand } from './run-command.js';
import { runTests } from './run-tests.js';
import {
  argsSchema,
  fail,
  toolParameters,
  type ToolContext,
  type ToolDefinition,
  type ToolRegistry,
  type ToolResult,
  type ToolSchema,
} from './types.js';
import { createFile, deleteFile, editFile } from './write-tools.js';
import { stopwatch } from '../trace/phases.js';

/** Thrown (or reported as error_code `isolation_lost`) when a sandbox can no longer be trusted: the run stops. */
export class IsolationError extends Error {}

/** The repository tools every run has. */
export const DEFAULT_TOOLS: ToolDefinition[] = [
  listFiles,
  readFile,
  searchCode,
  editFile,
  createFile,
  deleteFile,
  runTests,
  runCommand,
  gitDiff,
];

/** The repository tools plus, when the model may build its own environment, build_environment naming the local base images. */
export async function toolsFor(
  builder: EnvironmentBuilder | null,
  /** The local base images as the model reads them, when the caller listed them already. */
  baseImages?: readonly string[],
): Promise<ToolDefinition[]> {
  return builder
    ? [...DEFAULT_TOOLS, makeBuildEnvironmentTool(baseImages ?? (await builder.localBaseImages()))]
    : DEFAULT_TOOLS;
}

/**
 * The latest run_tests of the agent's work (not a run at the base revision): the one record of it,
 * read by the working state, the progress reports and result.json.
 */
export interface TestRecord {
  status: RunStatus;
  exit_code: number | null;
  summary: TestSummary | null;
  revision: string;
  target: string;
  /** `all`: the target's whole command; otherwise the `tests` it was narrowed to. */
  tests: 'all' | string[];
  /** Set once something happened since that the result does not account for. */
  stale: false | 'files changed since' | 'environment rebuilt since';
  duration_ms: number;
  /** The output as the model was given it (failure blocks in `failures`, pass lines left out). */
  stdout: string;
  stderr: string;
  /** Per stream: whether the capture cap cut it (passing-test lines left out are not a cut). */
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  detail?: string;
}

/** The last test run as the working state tells it: what it found, what it covered, whether it still holds. */
export function lastTestState(t: TestRecord | null) {
  if (!t) return null;
  const { status, exit_code, summary, target, tests, stale } = t;
  return { status, exit_code, summary, target, tests, stale };
}

export interface HostToolRegistry extends ToolRegistry {
  lastTest(): TestRecord | null;
}

/** The fields of a run_tests result the record is made from. */
const TestData = z.looseObject({
  at: z.enum(['workspace', 'base']).optional(),
  target: z.string(),
  tests: z.array(z.string()).optional(),
  status: z.enum(['passed', 'failed', 'timeout', 'error', 'cancelled']),
  exit_code: z.number().nullable(),
  summary: z.custom<TestSummary | null>(),
  revision: z.string(),
  duration_ms: z.number(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  detail: z.string().optional(),
});

/**
 * The model's tools bound to one run. Arguments are validated against each tool's strict schema
 * (unknown fields such as `worktree` are rejected, so the host-held context cannot be replaced),
 * calls run one at a time, and every call is traced as tool_start / tool_end.
 */
export function createRegistry(ctx: ToolContext, tools: ToolDefinition[] = DEFAULT_TOOLS): HostToolRegistry {
  const byName = new Map(tools.map((t) => [t.name, t]));
  let queue: Promise<unknown> = Promise.resolve();
  let edited = false;
  let lastTest: TestRecord | null = null;

  async function invoke(name: string, args: unknown): Promise<ToolResult> {
    const elapsed = stopwatch();
    try {
      ctx.trace.event('tool_start', { name, args });
    } catch (err) {
      return fatal(err);
    }
    const tool = byName.get(name);
    let result = tool
      ? await execute(tool, args)
      : fail('unknown_tool', `unknown tool "${name}"; tools: ${[...byName.keys()].join(', ')}`);
    if (result.error_code === 'isolation_lost') result = { ...result, fatal: true };
    if (tool) result = track(tool, result);
    try {
      ctx.trace.event('tool_end', {
        name,
        args,
        result,
        duration_ms: elapsed(),
        error: result.error_code,
      });
    } catch (err) {
      return fatal(err);
    }
    return result;
  }

  async function execute(tool: ToolDefinition, args: unknown): Promise<ToolResult> {
    // Models send nothing (or null) for tools without arguments.
    const parsed = argsSchema(tool, ctx.limits).safeParse(args ?? {});
    if (!parsed.success) {
      return fail(
        'invalid_arguments',
        `invalid arguments for ${tool.name}:\n${z.prettifyError(parsed.error)}`,
        {
          issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
        },
      );
    }
    if (ctx.signal?.aborted) return fail('cancelled', 'the run was cancelled');
    try {
      return await tool.run(ctx, parsed.data);
    } catch (err) {
      if (err instanceof TraceError || err instanceof IsolationError) return fatal(err);
      return fail('internal_error', `${tool.name} failed: ${(err as Error).message}`);
    }
  }

  /** Edits and rebuilds make the last test result stale; a test run reports the stale result it replaces. */
  function track(tool: ToolDefinition, result: ToolResult): ToolResult {
    const stale = (why: Exclude<TestRecord['stale'], false>) => {
      if (lastTest && !lastTest.stale) lastTest = { ...lastTest, stale: why };
    };
    if (tool.mutates) {
      if (!result.success) return result;
      edited = true;
      stale('files changed since');
      return result;
    }
    const rebuilt = (result.data as { environment_rebuilt?: unknown } | null)?.environment_rebuilt;
    if ((tool.name === 'build_environment' && result.success) || rebuilt) stale('environment rebuilt since');
    const parsed = TestData.safeParse(result.data);
    if (tool.name !== runTests.name || !parsed.success || parsed.data.at === 'base') return result;
    const d = parsed.data;
    const previous = lastTest;
    lastTest = {
      status: d.status,
      exit_code: d.exit_code,
      summary: d.summary ?? null,
      revision: d.revision,
      target: d.target,
      tests: d.tests ?? 'all',
      stale: false,
      duration_ms: d.duration_ms,
      stdout: d.stdout,
      stderr: d.stderr,
      stdout_truncated: d.stdout_truncated,
      stderr_truncated: d.stderr_truncated,
      ...(d.detail ? { detail: d.detail } : {}),
    };
    const stalePrevious =
      previous?.stale && previous.revision !== d.revision
        ? { status: previous.status, revision: previous.revision, note: previous.stale }
        : null;
    return { ...result, data: { ...(result.data as object), stale_previous: stalePrevious } };
  }

  return {
    context: ctx,
    names: () => [...byName.keys()],
    mutates: (name) => byName.get(name)?.mutates ?? false,
    schemas: () => tools.map((t) => toSchema(t, ctx.limits)),
    call(name, args) {
      const run = queue.then(() => invoke(name, args));
      queue = run.catch(() => undefined);
      return run;
    },
    hasEdits: () => edited,
    lastTest: () => lastTest,
  };
}

function toSchema(tool: ToolDefinition, limits: ToolContext['limits']): ToolSchema {
  const parameters = toolParameters(argsSchema(tool, limits));
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
}

function fatal(err: unknown): ToolResult {
  const code = err instanceof IsolationError ? 'isolation_lost' : 'internal_error';
  return fail(code, `run stopped: ${(err as Error).message}`, null, true);
}
