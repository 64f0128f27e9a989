import Docker from 'dockerode';
import { newRunId } from '../trace/ids.js';
import { Budget } from '../agent/budget.js';
import { ContextManager } from '../agent/context.js';
import { createModelClient, type ModelHandle } from './model-client.js';
import { costRefusal, modelPrice } from './pricing.js';
import { runAgentLoop, type LoopOutcome } from '../agent/loop.js';
import {
  GUIDANCE_FILES,
  GUIDANCE_MAX_CHARS,
  limitsNote,
  loadPrompts,
  renderTask,
  type Guidance,
} from '../agent/prompts.js';
import { loadEnv } from '../config/config.js';
import { SECRET_ENV_NAMES } from '../config/env.js';
import { describeBaseImage, NODE_REPO, runtimeImage } from '../images/base-images.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import { LocalSandbox } from '../environment/local.js';
import { nodeSetupNote } from '../environment/node.js';
import { exportPatch } from '../patch/patch.js';
import type { SkippedFile } from '../patch/types.js';
import {
  createRegistry,
  DEFAULT_TOOLS,
  lastTestState,
  toolsFor,
  type HostToolRegistry,
} from '../tools/registry.js';
import type { ToolContext, ToolDefinition } from '../tools/types.js';
import { capMiddle } from '../trace/cap.js';
import { RunTrace, TraceError, type Artifact } from '../trace/trace.js';
import { stripUserinfo } from '../workspace/git.js';
import { GitWorkspaceManager } from '../workspace/manager.js';
import { worktreeOverLimits } from '../workspace/tree.js';
import type { Worktree } from '../workspace/types.js';
import { removeOldWorktrees } from './startup.js';
import type { RepairResult, StopReason } from '../agent/types.js';
import type { RepairOptions, RepairProgress } from './types.js';
import { PhaseClock, stopwatch } from '../trace/phases.js';

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * One repair, end to end: workspace → environment → model-driven loop → patch. Always leaves
 * runs/<id>/ with events.jsonl, state.json, result.json and final.patch, whatever the stop reason.
 */
export async function runRepair(opts: RepairOptions): Promise<RepairResult> {
  const { config } = opts;
  const runId = opts.runId ?? newRunId();
  const budgets = { ...config.budgets, ...opts.budgets };
  const prompts = loadPrompts();
  const startedAt = new Date();
  const elapsed = stopwatch();
  const specKey = opts.model.kind === 'url' ? opts.model.apiKey : undefined;
  // Secrets may come from the environment or from .env (as `serve` reads them): redact both.
  const hostEnv = loadEnv();
  const secrets = [config.model.apiKey, specKey, ...SECRET_ENV_NAMES.map((n) => hostEnv[n])];
  const trace = new RunTrace(runId, config.runsDir, secrets, opts.onEvent);
  const { price } = modelPrice(opts.model, config.model);
  const budget = new Budget(budgets, { price });
  const contextParams = { ...config.context, observationMaxChars: config.limits.observationMaxChars };
  // The time budget aborts whatever is in flight (model request, test run); the loop reports it as time_budget.
  const signal = AbortSignal.any([
    opts.signal ?? new AbortController().signal,
    AbortSignal.timeout(budgets.timeMs),
  ]);
  const workspaces = new GitWorkspaceManager({ cacheDir: config.cacheDir, worktreeDir: config.worktreeDir });
  // Leases the run's images from the first build or cache hit to the end of the run, whatever ends it.
  const builder =
    opts.sandbox === 'docker' ? new DockerEnvironmentBuilder(new Docker(), config.sandbox) : null;
  let worktree: Worktree | null = null;
  let baseCommit = '';
  let ctx: ToolContext | null = null;
  let model: ModelHandle | null = null;
  let context: ContextManager | null = null;
  let registry: HostToolRegistry | null = null;
  let step = 0;
  const phases = new PhaseClock();
  let phase: RepairProgress['phase'] = 'preparing_workspace';
  const progress = (now: RepairProgress['phase'], build?: RepairProgress['build']) => {
    phase = now;
    opts.onProgress?.({
      phase,
      step,
      tokens_used: budget.tokens.total,
      token_budget: budgets.tokens,
      cost_usd: budget.costUsd,
      cost_budget: budgets.costUsd,
      estimated: budget.estimated,
      last_test: registry?.lastTest()?.status ?? null,
      ...(build ? { build } : {}),
    });
  };
  // A build's clock starts at its first step (a cache hit has none).
  let buildClock = stopwatch();
  const onBuildStep = (s: string) => {
    if (/^Step 1\//.test(s)) buildClock = stopwatch();
    progress(phase, { step: s, elapsed_ms: buildClock() });
  };
  const writeState = (phase: string) =>
    trace.writeState({
      run_id: runId,
      phase,
      step,
      ...budget.snapshot(),
      working_state: context?.state ?? null,
    });

  let outcome: LoopOutcome;
  try {
    trace.event('run_start', {
      remote: stripUserinfo(opts.remote),
      base: opts.baseCommit,
      issue: opts.issue,
      test_argv: opts.testArgv,
      sandbox: opts.sandbox,
      prompt_hash: prompts.hash,
      budgets,
      context: contextParams,
    });
    // First, so a misconfigured model fails before any clone or build.
    phases.start('model_setup');
    const unpriced = costRefusal(opts.model, config.model, budgets.costUsd);
    if (unpriced) throw new Error(unpriced);
    model = await createModelClient(opts.model, config.model, (info) =>
      trace.event('model_retry', { ...info }),
    );
    trace.event('model', { ...model.describe, price });
    progress('preparing_workspace');
    writeState('preparing_workspace');
    phases.start('workspace');
    baseCommit = await workspaces.resolve(opts.remote, opts.baseCommit);
    worktree = await workspaces.create(opts.remote, baseCommit, runId);
    trace.event('workspace_ready', { base_commit: baseCommit, worktree: worktree.path });
    // From the mirror's objects at the base commit, before any code runs in the worktree.
    let guidance: Guidance | null = null;
    for (const file of opts.guidanceFiles ?? GUIDANCE_FILES) {
      const text = await workspaces.fileAt(opts.remote, baseCommit, file);
      if (text !== null) {
        guidance = { path: file, text };
        break;
      }
    }
    if (guidance)
      trace.event('repository_guidance', {
        path: guidance.path,
        chars: guidance.text.length,
        cut: guidance.text.length > GUIDANCE_MAX_CHARS,
      });

    phases.start('environment');
    const env = await prepareEnvironment(opts, builder, runId, worktree.path, trace, signal, {
      building: () => progress('building_environment'),
      onStep: onBuildStep,
    });
    ctx = {
      runId,
      worktree: worktree.path,
      gitDir: worktree.gitDir,
      baseCommit,
      limits: config.limits,
      testCommands: { default: opts.testArgv },
      protectedPaths: opts.protectedPaths ?? [],
      runDir: trace.dir,
      sandbox: env.sandbox,
      environment: env.environment,
      builder: env.builder,
      trace,
      signal,
      onBuildStep,
      onBuilding: (building) => phases.start(building ? 'environment' : 'agent'),
      // A fresh worktree of the base commit per call, from the mirror: never a copy of the agent's tree.
      baseTree: async () => {
        const wt = await workspaces.create(opts.remote, baseCommit, `${runId}-base-${newRunId().slice(-8)}`);
        return { path: wt.path, release: () => workspaces.remove(wt) };
      },
    };
    const tools = createRegistry(ctx, env.tools);
    registry = tools;
    const task = renderTask(prompts.task, {
      guidance,
      limits: limitsNote(config.limits, budgets),
      issue: opts.issue,
      baseCommit,
      testArgv: opts.testArgv,
      environment: opts.protectedPaths?.length
        ? `${env.note}\nThese paths are protected and must not change: ${opts.protectedPaths.join(', ')}.`
        : env.note,
    });
    context = new ContextManager(contextParams, prompts.system, task, () => ({
      last_test: lastTestState(tools.lastTest()),
      budget_left: budget.left(),
    }));
    progress('working');
    phases.start('agent');
    outcome = await runAgentLoop({
      model: model.client,
      registry: tools,
      context,
      budget,
      agent: config.agent,
      trace,
      signal,
      onStep: () => {
        step++;
        writeState('working');
        progress('working');
      },
    });
  } catch (err) {
    // The time budget also aborts a clone or a maintainer build in flight: report it as such, not as fatal.
    const stop: StopReason = opts.signal?.aborted ? 'cancelled' : signal.aborted ? 'time_budget' : 'fatal';
    outcome = { stop_reason: stop, summary: null, error: capMiddle(message(err)), model_name: null };
    // An unwritable trace (a full disk) is kept in trace.failure: the worktree is still given back below.
    if (!trace.failure) trace.event('stop', { stop_reason: stop, error: outcome.error });
  } finally {
    await model?.close();
    await builder
      ?.release(runId)
      .catch((err: unknown) => trace.event('lease_release_failed', { error: message(err) }));
  }

  // Every stop saves the patch as it stands.
  phases.start('patch_and_cleanup');
  let patch = '';
  let skipped: SkippedFile[] = [];
  let error = outcome.error;
  if (worktree) {
    try {
      ({ patch, skipped } = await exportPatch(worktree, baseCommit, {
        maxFileBytes: config.limits.maxPatchFileBytes,
      }));
      if (skipped.length > 0)
        trace.event('patch_files_skipped', {
          max_file_bytes: config.limits.maxPatchFileBytes,
          files: skipped,
        });
    } catch (err) {
      error = [error, `patch export failed: ${capMiddle(message(err))}`].filter(Boolean).join('; ');
    }
  }
  let worktreePath = worktree?.path ?? null;
  // A full disk: the worktree is given back (whatever the keep policy) and the record written again.
  const record = async <T>(write: () => T): Promise<T> => {
    try {
      return write();
    } catch (err) {
      if (!(err instanceof TraceError) || !worktree || worktreePath === null) throw err;
      await workspaces.remove(worktree);
      worktreePath = null;
      return write();
    }
  };
  const artifacts: Artifact[] = [await record(() => trace.writeArtifact('final.patch', patch))];
  if (worktree && worktreePath && !(await keepWorktree(opts, outcome.stop_reason, worktree.path))) {
    await workspaces.remove(worktree).then(
      () => (worktreePath = null),
      (err) => trace.event('worktree_remove_failed', { error: message(err) }),
    );
  }
  await removeOldWorktrees(config).then(
    (removed) => removed.length > 0 && trace.event('old_worktrees_removed', { worktrees: removed }),
    (err) => trace.event('worktree_remove_failed', { error: message(err) }),
  );

  phases.stop();
  const env = ctx as ToolContext | null;
  const result: RepairResult = {
    run_id: runId,
    stop_reason: outcome.stop_reason,
    base_commit: baseCommit,
    patch,
    patch_path: artifacts[0]!.path,
    patch_skipped: skipped,
    trace_path: trace.eventsPath,
    result_path: trace.resultPath,
    run_dir: trace.dir,
    dockerfile: env?.environment?.dockerfile ?? null,
    image_id: env?.environment?.imageId ?? null,
    summary: outcome.summary,
    tokens: { ...budget.tokens },
    cost_usd: budget.costUsd,
    requests: budget.requests,
    tool_calls: budget.toolCalls,
    duration_ms: elapsed(),
    phases_ms: phases.snapshot(),
    model_name: outcome.model_name,
    suite_ms: ctx?.suiteMs ?? null,
    prompt_hash: prompts.hash,
    last_test: registry?.lastTest() ?? null,
    worktree_path: worktreePath,
    // Said on the issue when the run fails: the provider's error may quote the key it was sent.
    error: error === null ? null : trace.redactor.text(error),
  };
  await record(() => writeState('done'));
  if (env?.environment) artifacts.push(trace.artifact('Dockerfile', `${trace.dir}/Dockerfile`));
  const { patch: _patch, ...recorded } = result;
  await record(() =>
    trace.writeResult({
      ...recorded,
      success: result.stop_reason === 'completed',
      started_at: startedAt.toISOString(),
      finished_at: new Date().toISOString(),
      counts: {
        requests: result.requests,
        tool_calls: result.tool_calls,
        tokens_prompt: result.tokens.prompt,
        tokens_completion: result.tokens.completion,
        tokens_cached: result.tokens.cached,
        tokens_total: result.tokens.total,
        duration_ms: result.duration_ms,
      },
      budgets,
      model: model ? { ...model.describe, price } : null,
      artifacts,
    }),
  );
  // A run whose record is incomplete (a write failed) ends here: nothing unrecorded is judged or published.
  if (trace.failure) throw trace.failure;
  progress('done');
  return result;
}

/** `--keep-worktree` keeps it; a failed run's is kept when configured, unless it is over a limit. */
async function keepWorktree(opts: RepairOptions, stop: StopReason, worktree: string): Promise<boolean> {
  if (opts.keepWorktree) return true;
  if (stop === 'completed' || !opts.config.app.keepFailedWorktrees) return false;
  return (await worktreeOverLimits(worktree, opts.config.limits)) === null;
}

interface PreparedEnvironment {
  sandbox: ToolContext['sandbox'];
  builder: ToolContext['builder'];
  environment: ToolContext['environment'];
  tools: ToolDefinition[];
  /** One line for the task prompt about where tests run. */
  note: string;
}

/**
 * Local: tests run on the host (trusted repositories only). Docker: a maintainer Dockerfile is built up
 * front; without one the model writes its own with build_environment.
 */
async function prepareEnvironment(
  opts: RepairOptions,
  builder: DockerEnvironmentBuilder | null,
  runId: string,
  worktree: string,
  trace: RunTrace,
  signal: AbortSignal,
  progress: { building: () => void; onStep: (step: string) => void },
): Promise<PreparedEnvironment> {
  if (!builder) {
    return {
      sandbox: new LocalSandbox(),
      builder: null,
      environment: null,
      tools: DEFAULT_TOOLS,
      note: 'The test environment is ready.',
    };
  }
  // Facts the model would otherwise learn by failing: where the code is, what the tests can reach.
  const where = `Tests run in a container with the repository mounted at ${CONTAINER_WORKTREE} (the working directory), without network.`;
  if (!opts.dockerfile) {
    const images = await builder.baseImages().catch(() => []);
    const nodeImage = runtimeImage(images, NODE_REPO);
    const node = nodeSetupNote(worktree, { nodeImage, baseImage: opts.config.sandbox.baseImage });
    const note = [
      'There is no test environment yet: first write a Dockerfile for it and call build_environment.',
      `Base images available locally: ${images.map(describeBaseImage).join(', ') || '(none)'}; container registries may be unreachable.`,
      where,
      ...(node ? [node] : []),
    ].join('\n');
    return { sandbox: null, builder, environment: null, tools: await toolsFor(builder), note };
  }
  progress.building();
  const built = await builder.build({
    dockerfile: opts.dockerfile,
    worktree,
    runId,
    signal,
    onStep: progress.onStep,
  });
  trace.event('environment_built', { ...built });
  if (!built.success || !built.image_id)
    throw new Error(`the maintainer Dockerfile did not build: ${built.error}`);
  trace.writeArtifact('Dockerfile', opts.dockerfile);
  return {
    sandbox: builder.runSandboxFor(built.image_id),
    builder,
    environment: { dockerfile: opts.dockerfile, imageId: built.image_id },
    tools: DEFAULT_TOOLS,
    note: `The test environment is built from the maintainer's Dockerfile. ${where}`,
  };
}
