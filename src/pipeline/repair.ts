import { ContextManager } from '../agent/context.js';
import { runAgentLoop } from '../agent/loop.js';
import { GUIDANCE_FILES, GUIDANCE_MAX_CHARS, limitsNote, renderTask } from '../agent/prompts.js';
import type { RepairResult, StopReason } from '../agent/types.js';
import { exportPatch } from '../patch/patch.js';
import { lastTestState } from '../tools/registry.js';
import { capMiddle } from '../trace/cap.js';
import { stripUserinfo } from '../workspace/git.js';
import { worktreeOverLimits } from '../workspace/tree.js';
import { freeBytes } from './disk.js';
import { createModelClient } from './model-client.js';
import { costRefusal } from './pricing.js';
import {
  openRepair,
  progress,
  record,
  runStep,
  writeState,
  type RepairContext,
  type RepairStep,
} from './repair-context.js';
import { environmentStep, listBaseImages } from './repair-environment.js';
import { removeOldWorktrees } from './startup.js';
import type { RepairOptions } from './types.js';

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * One repair, end to end, as named steps over a RepairContext (repair-context.ts): model_setup →
 * workspace → environment → agent, then, whatever stopped them, patch_and_cleanup and the record.
 * Always leaves runs/<id>/ with events.jsonl, state.json, result.json and final.patch.
 */
export async function runRepair(opts: RepairOptions): Promise<RepairResult> {
  const c = openRepair(opts);
  // The run's container is removed (and its image leases ended) while the patch is exported and the
  // record written, and waited for before the repair returns. Nothing runs in it between tool calls:
  // each call's wrapper kills every process it left, and a call that was killed retired the container.
  let released: Promise<unknown> | null = null;
  const release = () =>
    (released ??=
      opts.sandbox === 'docker'
        ? opts.images
            .release(c.runId)
            .catch((err: unknown) => c.trace.event('lease_release_failed', { error: message(err) }))
        : Promise.resolve());
  try {
    try {
      c.trace.event('run_start', {
        remote: stripUserinfo(opts.remote),
        base: opts.baseCommit,
        issue: opts.issue,
        test_argv: opts.testArgv,
        sandbox: opts.sandbox,
        prompt_hash: c.prompts.hash,
        budgets: c.budgets,
        context: c.contextParams,
      });
      for (const step of STEPS) await runStep(c, step);
    } catch (err) {
      // The time budget also aborts a clone or a maintainer build in flight: report it as such, not as fatal.
      const stop: StopReason = opts.signal?.aborted
        ? 'cancelled'
        : c.signal.aborted
          ? 'time_budget'
          : 'fatal';
      c.outcome = { stop_reason: stop, summary: null, error: capMiddle(message(err)), model_name: null };
      // An unwritable trace (a full disk) is kept in trace.failure: the worktree is still given back below.
      if (!c.trace.failure) c.trace.event('stop', { stop_reason: stop, error: c.outcome.error });
    } finally {
      void release();
      await c.model?.close();
    }
    return await finish(c);
  } finally {
    await release();
  }
}

/** The steps until the loop stops; the first failure ends them (a fatal, cancelled or time_budget stop). */
const STEPS: readonly RepairStep[] = [
  // First, so a misconfigured model fails before any clone or build.
  { name: 'model_setup', run: setupModel },
  { name: 'workspace', run: createWorkspace },
  { name: 'environment', run: environmentStep },
  { name: 'agent', run: runAgent },
];

async function setupModel(c: RepairContext): Promise<void> {
  const { opts, config, trace } = c;
  const unpriced = costRefusal(opts.model, config.model, c.budgets.costUsd);
  if (unpriced) throw new Error(unpriced);
  c.model = await createModelClient(opts.model, config.model, (info) =>
    trace.event('model_retry', { ...info }),
  );
  trace.event('model', { ...c.model.describe, price: c.price });
}

/** The worktree at the base commit, and the repository's guidance read from the mirror before any code runs. */
async function createWorkspace(c: RepairContext): Promise<void> {
  const { opts, trace } = c;
  const { workspaces } = opts;
  progress(c, 'preparing_workspace');
  writeState(c, 'preparing_workspace');
  listBaseImages(c);
  c.baseCommit = await workspaces.resolve(opts.remote, opts.baseCommit);
  // The commit is in the mirror now: its guidance is read there while the worktree is checked out.
  const [worktree, guidance] = await Promise.all([
    workspaces.create(opts.remote, c.baseCommit, c.runId),
    workspaces.firstFileAt(opts.remote, c.baseCommit, opts.guidanceFiles ?? GUIDANCE_FILES),
  ]);
  c.worktree = worktree;
  c.worktreePath = worktree.path;
  trace.event('workspace_ready', { base_commit: c.baseCommit, worktree: worktree.path });
  if (guidance) {
    c.guidance = guidance;
    trace.event('repository_guidance', {
      path: guidance.path,
      chars: guidance.text.length,
      cut: guidance.text.length > GUIDANCE_MAX_CHARS,
    });
  }
}

async function runAgent(c: RepairContext): Promise<void> {
  const { opts, config, budget, prompts } = c;
  const registry = c.registry!;
  const task = renderTask(prompts.task, {
    guidance: c.guidance,
    limits: limitsNote(config.limits, c.budgets),
    issue: opts.issue,
    baseCommit: c.baseCommit,
    testArgv: opts.testArgv,
    environment: c.environmentNote,
  });
  const context = new ContextManager(c.contextParams, prompts.system, task, () => ({
    last_test: lastTestState(registry.lastTest()),
    budget_left: budget.left(),
  }));
  c.context = context;
  progress(c, 'working');
  c.outcome = await runAgentLoop({
    model: c.model!.client,
    registry,
    context,
    budget,
    agent: config.agent,
    trace: c.trace,
    signal: c.signal,
    onStep: () => {
      c.step++;
      writeState(c, 'working');
      progress(c, 'working');
    },
  });
}

/** Every stop saves the patch as it stands, gives the worktree back unless kept, and writes the record. */
async function finish(c: RepairContext): Promise<RepairResult> {
  await runStep(c, { name: 'patch_and_cleanup', run: saveAndTidy });
  c.phases.stop();
  const result = await recordResult(c);
  // A run whose record is incomplete (a write failed) ends here: nothing unrecorded is judged or published.
  if (c.trace.failure) throw c.trace.failure;
  progress(c, 'done');
  return result;
}

/** The patch as it stands (final.patch), the worktree given back unless kept, old worktrees removed. */
async function saveAndTidy(c: RepairContext): Promise<void> {
  const { opts, config, trace, worktree } = c;
  const outcome = c.outcome!;
  if (worktree) {
    try {
      ({ patch: c.patch, skipped: c.skipped } = await exportPatch(worktree, c.baseCommit, {
        maxFileBytes: config.limits.maxPatchFileBytes,
      }));
      if (c.skipped.length > 0)
        trace.event('patch_files_skipped', {
          max_file_bytes: config.limits.maxPatchFileBytes,
          files: c.skipped,
        });
    } catch (err) {
      outcome.error = [outcome.error, `patch export failed: ${capMiddle(message(err))}`]
        .filter(Boolean)
        .join('; ');
    }
  }
  c.artifacts.push(await record(c, () => trace.writeArtifact('final.patch', c.patch)));
  if (worktree && c.worktreePath && !(await keepWorktree(opts, outcome.stop_reason, worktree.path))) {
    await opts.workspaces.remove(worktree).then(
      () => (c.worktreePath = null),
      (err) => trace.event('worktree_remove_failed', { error: message(err) }),
    );
  }
  await removeOldWorktrees(config, opts.workspaces).then(
    (removed) => removed.length > 0 && trace.event('old_worktrees_removed', { worktrees: removed }),
    (err) => trace.event('worktree_remove_failed', { error: message(err) }),
  );
}

/** Writes state.json and result.json (final.patch is written already). */
async function recordResult(c: RepairContext): Promise<RepairResult> {
  const { trace, budget, artifacts } = c;
  const outcome = c.outcome!;
  const environment = c.tools?.environment ?? null;
  const result: RepairResult = {
    run_id: c.runId,
    stop_reason: outcome.stop_reason,
    base_commit: c.baseCommit,
    patch: c.patch,
    patch_path: artifacts[0]!.path,
    patch_skipped: c.skipped,
    trace_path: trace.eventsPath,
    result_path: trace.resultPath,
    run_dir: trace.dir,
    dockerfile: environment?.dockerfile ?? null,
    image_id: environment?.imageId ?? null,
    summary: outcome.summary,
    tokens: { ...budget.tokens },
    cost_usd: budget.costUsd,
    requests: budget.requests,
    tool_calls: budget.toolCalls,
    duration_ms: c.elapsed(),
    phases_ms: c.phases.snapshot(),
    model_name: outcome.model_name,
    suite_ms: c.tools?.suiteMs ?? null,
    prompt_hash: c.prompts.hash,
    last_test: c.registry?.lastTest() ?? null,
    worktree_path: c.worktreePath,
    // Said on the issue when the run fails: the provider's error may quote the key it was sent.
    error: outcome.error === null ? null : trace.redactor.text(outcome.error),
  };
  await record(c, () => writeState(c, 'done'));
  if (environment) artifacts.push(trace.artifact('Dockerfile', `${trace.dir}/Dockerfile`));
  const { patch: _patch, ...recorded } = result;
  await record(c, () =>
    trace.writeResult({
      ...recorded,
      success: result.stop_reason === 'completed',
      started_at: c.startedAt.toISOString(),
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
      budgets: c.budgets,
      model: c.model ? { ...c.model.describe, price: c.price } : null,
      artifacts,
    }),
  );
  return result;
}

/**
 * `--keep-worktree` keeps it; a failed run's is kept when configured, unless it is over a limit or the
 * disk has less than AGENTICFIX_MIN_FREE_MB free (as after a run that threw: job.ts `salvage`).
 */
async function keepWorktree(opts: RepairOptions, stop: StopReason, worktree: string): Promise<boolean> {
  if (opts.keepWorktree) return true;
  if (stop === 'completed' || !opts.config.app.keepFailedWorktrees) return false;
  if ((await worktreeOverLimits(worktree, opts.config.limits)) !== null) return false;
  return (await freeBytes([worktree]).catch(() => 0)) >= opts.config.app.minFreeBytes;
}
