import { Budget } from '../agent/budget.js';
import type { ContextManager } from '../agent/context.js';
import type { LoopOutcome } from '../agent/loop.js';
import { loadPrompts, type Guidance, type Prompts } from '../agent/prompts.js';
import { loadEnv, type Config } from '../config/config.js';
import { SECRET_ENV_NAMES } from '../config/env.js';
import type { BaseImage } from '../images/base-images.js';
import type { SkippedFile } from '../patch/types.js';
import type { HostToolRegistry } from '../tools/registry.js';
import type { ToolContext } from '../tools/types.js';
import { newRunId } from '../trace/ids.js';
import { PhaseClock, stopwatch } from '../trace/phases.js';
import { RunTrace, TraceError, type Artifact } from '../trace/trace.js';
import type { Worktree } from '../workspace/types.js';
import type { ModelHandle } from './model-client.js';
import { modelPrice } from './pricing.js';
import type { RepairOptions, RepairProgress } from './types.js';

/**
 * One repair's state, read and filled in by its steps (repair.ts) in order: what is known before the
 * first step is readonly; each step sets what it made, so a later step (and the record) finds it.
 */
export interface RepairContext {
  readonly opts: RepairOptions;
  readonly config: Config;
  readonly runId: string;
  readonly budgets: Config['budgets'];
  readonly prompts: Prompts;
  readonly trace: RunTrace;
  readonly price: ReturnType<typeof modelPrice>['price'];
  readonly budget: Budget;
  readonly contextParams: Config['context'] & { observationMaxChars: number };
  /** The caller's cancel and the time budget: aborts whatever is in flight (a request, a test run, a build). */
  readonly signal: AbortSignal;
  readonly phases: PhaseClock;
  readonly elapsed: () => number;
  readonly startedAt: Date;
  /** model_setup */
  model: ModelHandle | null;
  /** workspace */
  baseCommit: string;
  worktree: Worktree | null;
  guidance: Guidance | null;
  /** The base images the model is told of (listBaseImages), listed while the worktree is made. */
  baseImages: Promise<BaseImage[]> | null;
  /** environment: what the tools run against, and the note the task prompt gets about it */
  tools: ToolContext | null;
  registry: HostToolRegistry | null;
  environmentNote: string;
  /** agent */
  context: ContextManager | null;
  step: number;
  phase: RepairProgress['phase'];
  /** A build's clock starts at its first step (a cache hit has none). */
  buildClock: () => number;
  outcome: LoopOutcome | null;
  /** patch_and_cleanup */
  patch: string;
  skipped: SkippedFile[];
  /** The worktree while it is kept; null once given back. */
  worktreePath: string | null;
  /** What the run wrote for result.json, final.patch first. */
  artifacts: Artifact[];
}

/** The context before the first step: budgets, prompts, the trace (redacting every secret) and the clocks. */
export function openRepair(opts: RepairOptions): RepairContext {
  const { config } = opts;
  const runId = opts.runId ?? newRunId();
  const budgets = { ...config.budgets, ...opts.budgets };
  const specKey = opts.model.kind === 'url' ? opts.model.apiKey : undefined;
  // Secrets may come from the environment or from .env (as `serve` reads them): redact both.
  const hostEnv = loadEnv();
  const secrets = [config.model.apiKey, specKey, ...SECRET_ENV_NAMES.map((n) => hostEnv[n])];
  const { price } = modelPrice(opts.model, config.model);
  return {
    opts,
    config,
    runId,
    budgets,
    prompts: loadPrompts(),
    trace: new RunTrace(runId, config.runsDir, secrets, opts.onEvent),
    price,
    budget: new Budget(budgets, { price }),
    contextParams: { ...config.context, observationMaxChars: config.limits.observationMaxChars },
    signal: AbortSignal.any([
      opts.signal ?? new AbortController().signal,
      AbortSignal.timeout(budgets.timeMs),
    ]),
    phases: new PhaseClock(),
    elapsed: stopwatch(),
    startedAt: new Date(),
    model: null,
    baseCommit: '',
    worktree: null,
    guidance: null,
    baseImages: null,
    tools: null,
    registry: null,
    environmentNote: '',
    context: null,
    step: 0,
    phase: 'preparing_workspace',
    buildClock: stopwatch(),
    outcome: null,
    patch: '',
    skipped: [],
    worktreePath: null,
    artifacts: [],
  };
}

/** Tells the caller where the repair is (the status comment); `build` while an image builds. */
export function progress(
  c: RepairContext,
  now: RepairProgress['phase'],
  build?: RepairProgress['build'],
): void {
  c.phase = now;
  c.opts.onProgress?.({
    phase: now,
    step: c.step,
    tokens_used: c.budget.tokens.total,
    token_budget: c.budgets.tokens,
    cost_usd: c.budget.costUsd,
    cost_budget: c.budgets.costUsd,
    estimated: c.budget.estimated,
    last_test: c.registry?.lastTest()?.status ?? null,
    ...(build ? { build } : {}),
  });
}

/** Each build step as progress, timed from the build's first step. */
export function onBuildStep(c: RepairContext): (step: string) => void {
  return (s) => {
    if (/^Step 1\//.test(s)) c.buildClock = stopwatch();
    progress(c, c.phase, { step: s, elapsed_ms: c.buildClock() });
  };
}

export function writeState(c: RepairContext, phase: string): void {
  c.trace.writeState({
    run_id: c.runId,
    phase,
    step: c.step,
    ...c.budget.snapshot(),
    working_state: c.context?.state ?? null,
  });
}

/** A named step: its time is the phase of that name in result.json, and the trace says when it starts. */
export interface RepairStep {
  name: string;
  run(c: RepairContext): Promise<void>;
}

export async function runStep(c: RepairContext, step: RepairStep): Promise<void> {
  c.phases.start(step.name);
  try {
    c.trace.event('step', { name: step.name });
  } catch (err) {
    // An unwritable trace (a full disk) is kept in trace.failure, and the run ends on it: the step still runs.
    if (!(err instanceof TraceError)) throw err;
  }
  await step.run(c);
}

/**
 * Writes a part of the record. On a full disk the worktree is given back (whatever the keep policy)
 * and the write tried once more.
 */
export async function record<T>(c: RepairContext, write: () => T): Promise<T> {
  try {
    return write();
  } catch (err) {
    if (!(err instanceof TraceError) || !c.worktree || c.worktreePath === null) throw err;
    await c.opts.workspaces.remove(c.worktree);
    c.worktreePath = null;
    return write();
  }
}
