import { z } from 'zod';
import type { EnvironmentBuilder, RunStatus, TestSummary } from '../environment/types.js';
import { TraceError } from '../trace/trace.js';
import { makeBuildEnvironmentTool } from './build-environment.js';
import { gitDiff } from './git-diff.js';
import { listFiles, readFile, searchCode } from './read-tools.js';
import { runCommand } from './run-command.js';
import { runTests } from './run-tests.js';
import {
  argsSchema,
  fail,
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
export async function toolsFor(builder: EnvironmentBuilder | null): Promise<ToolDefinition[]> {
  return builder
    ? [...DEFAULT_TOOLS, makeBuildEnvironmentTool(await builder.localBaseImages())]
    : DEFAULT_TOOLS;
}

/** The latest run_tests outcome; `stale` once a mutating call succeeded after it. */
export interface TestRecord {
  outcome: RunStatus;
  revision: string;
  summary: TestSummary | null;
  stale: boolean;
}

export interface HostToolRegistry extends ToolRegistry {
  lastTest(): TestRecord | null;
}

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

  /** Edits make earlier test results stale; a test run reports the stale result it replaces. */
  function track(tool: ToolDefinition, result: ToolResult): ToolResult {
    if (tool.mutates) {
      if (!result.success) return result;
      edited = true;
      if (lastTest) lastTest = { ...lastTest, stale: true };
      return result;
    }
    const data = result.data as {
      status?: RunStatus;
      revision?: string;
      summary?: TestSummary | null;
    } | null;
    if (tool.name !== runTests.name || !data?.status || !data.revision) return result;
    const previous = lastTest;
    lastTest = { outcome: data.status, revision: data.revision, summary: data.summary ?? null, stale: false };
    const stalePrevious =
      previous?.stale && previous.revision !== data.revision
        ? { status: previous.outcome, revision: previous.revision, note: 'files changed since that run' }
        : null;
    return { ...result, data: { ...data, stale_previous: stalePrevious } };
  }

  return {
    context: ctx,
    names: () => [...byName.keys()],
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
  const { $schema: _, ...parameters } = z.toJSONSchema(argsSchema(tool, limits), { io: 'input' }) as Record<
    string,
    unknown
  >;
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
}

function fatal(err: unknown): ToolResult {
  const code = err instanceof IsolationError ? 'isolation_lost' : 'internal_error';
  return fail(code, `run stopped: ${(err as Error).message}`, null, true);
}
