import { randomBytes } from 'node:crypto';
import type { Config } from '../config/config.js';
import type { DockerEnvironmentBuilder } from '../images/builder.js';
import type { RunOutcome, SandboxFactory } from '../environment/types.js';
import type { TestSummary } from '../testrunners/summary.js';
import { applyPatch, exportPatch } from '../patch/patch.js';
import { createRegistry, toolsFor } from '../tools/registry.js';
import type { ToolContext, ToolResult } from '../tools/types.js';
import { RunTrace, TraceError } from '../trace/trace.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import type { Worktree } from '../workspace/types.js';
import {
  CALCULATOR_TEST_ARGV,
  calculatorDockerfile,
  calculatorFixCalls,
  createCalculatorRepo,
} from './calculator.js';

export interface DemoOptions {
  config: Config;
  sandbox: 'local' | 'docker';
  keepWorktrees: boolean;
  log: (line: string) => void;
  /** The process's parts (src/cli/compose.ts). */
  workspaces: GitWorkspaceManager;
  images: DockerEnvironmentBuilder;
  sandboxes: SandboxFactory;
}

export interface DemoSummary {
  result: 'success' | 'failure';
  base_tests: Counts | null;
  after_tests: Counts | null;
  verify_tests: Counts | null;
  patch_path: string | null;
  trace_path: string;
  result_path: string;
  worktrees: string[];
  error: string | null;
  [k: string]: unknown;
}

type Counts = Pick<TestSummary, 'passed' | 'failed'>;
const counts = (o: RunOutcome | null): Counts | null =>
  o?.summary ? { passed: o.summary.passed, failed: o.summary.failed } : null;

/**
 * The trusted tool-chain demo: no model, no key. A fixed sequence of tool calls repairs the
 * calculator in one worktree; the exported patch is then applied and tested in a second, clean one.
 */
export async function runToolsOnlyDemo(opts: DemoOptions): Promise<DemoSummary> {
  const { config, log, workspaces, sandboxes } = opts;
  const runId = `demo-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const trace = new RunTrace(runId, config.runsDir);
  const started = new Date().toISOString();
  const worktrees: Worktree[] = [];
  const summary: DemoSummary = {
    result: 'failure',
    base_tests: null,
    after_tests: null,
    verify_tests: null,
    patch_path: null,
    trace_path: trace.eventsPath,
    result_path: trace.resultPath,
    worktrees: [],
    error: null,
  };
  let toolCalls = 0;
  const builder = opts.sandbox === 'docker' ? opts.images : null;
  try {
    const { repo, baseCommit } = await createCalculatorRepo();
    log(`repository ${repo} at ${baseCommit.slice(0, 12)}`);
    const work = await workspaces.create(repo, baseCommit, `${runId}-work`);
    worktrees.push(work);
    const ctx: ToolContext = {
      runId,
      worktree: work.path,
      gitDir: work.gitDir,
      baseCommit,
      limits: config.limits,
      testCommands: { default: CALCULATOR_TEST_ARGV },
      runDir: trace.dir,
      sandbox: builder ? null : sandboxes.local(),
      environment: null,
      builder,
      trace,
    };
    const tools = await toolsFor(builder);
    const registry = createRegistry(ctx, tools);
    const call = async (name: string, args: Record<string, unknown>): Promise<ToolResult> => {
      toolCalls++;
      const res = await registry.call(name, args);
      log(`${name} ${res.success ? 'ok' : `failed: ${res.error}`}`);
      if (res.fatal) throw new Error(`fatal: ${res.error}`);
      if (!res.success) throw new Error(`${name} failed: ${res.error}`);
      return res;
    };
    const testOutcome = (res: ToolResult) => res.data as RunOutcome;

    if (builder)
      await call('build_environment', { dockerfile: calculatorDockerfile(config.sandbox.baseImage) });
    summary.base_tests = counts(testOutcome(await call('run_tests', {})));
    let after: RunOutcome | null = null;
    for (const step of calculatorFixCalls()) {
      const res = await call(step.name, step.arguments);
      if (step.name === 'run_tests') after = testOutcome(res);
    }
    summary.after_tests = counts(after);

    const exported = await exportPatch(work, baseCommit, { maxFileBytes: config.limits.maxPatchFileBytes });
    const patch = trace.writeArtifact('final.patch', exported.patch);
    summary.patch_path = patch.path;

    // Independent check: the patch alone, applied to a clean worktree at the same base.
    const clean = await workspaces.create(repo, baseCommit, `${runId}-verify`);
    worktrees.push(clean);
    const applied = await applyPatch(clean, exported.patch);
    if (!applied.ok) throw new Error(`patch does not apply: ${applied.error}`);
    const sandbox = ctx.environment ? sandboxes.container(ctx.environment.imageId, runId) : sandboxes.local();
    const verify = await sandbox.run({
      argv: CALCULATOR_TEST_ARGV,
      worktree: clean.path,
      timeoutMs: config.limits.maxTestTimeoutMs,
      maxOutputBytes: config.limits.maxOutputBytes,
    });
    trace.event('verify_tests', { outcome: verify });
    summary.verify_tests = counts(verify);
    const fixed = (c: Counts | null) => c !== null && c.failed === 0 && c.passed === 5;
    summary.result =
      summary.base_tests?.passed === 3 &&
      summary.base_tests.failed === 2 &&
      fixed(summary.after_tests) &&
      fixed(summary.verify_tests)
        ? 'success'
        : 'failure';
    if (summary.result === 'failure') summary.error = 'test numbers differ from the expected 3/2 → 5/0 → 5/0';
  } catch (err) {
    if (err instanceof TraceError) throw err;
    summary.error = (err as Error).message;
    trace.event('error', { error: summary.error });
  } finally {
    await builder?.release(runId).catch(() => undefined);
    const keep = opts.keepWorktrees || summary.result !== 'success';
    if (!keep) for (const wt of worktrees) await workspaces.remove(wt);
    summary.worktrees = keep ? worktrees.map((w) => w.path) : [];
    trace.writeResult({
      run_id: runId,
      stop_reason: summary.result === 'success' ? 'completed' : 'fatal',
      success: summary.result === 'success',
      started_at: started,
      finished_at: new Date().toISOString(),
      counts: { tool_calls: toolCalls },
      artifacts: summary.patch_path ? [trace.artifact('final.patch', summary.patch_path)] : [],
      error: summary.error,
      demo: {
        sandbox: opts.sandbox,
        base_tests: summary.base_tests,
        after_tests: summary.after_tests,
        verify_tests: summary.verify_tests,
      },
    });
  }
  return summary;
}
