import { createHash } from 'node:crypto';
import { newRunId } from '../trace/ids.js';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, totalmem } from 'node:os';
import path from 'node:path';
import type { Config } from '../config/config.js';
import { runCpus } from '../testrunners/runners.js';
import { testLimitMs } from '../environment/time-limits.js';
import type { BuildResult, Sandbox } from '../environment/types.js';
import { applyPatch, patchFiles } from '../patch/patch.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import type { Worktree } from '../workspace/types.js';
import { CellInfraError, CellIsolationError, runCell } from './cells.js';
import { evaluate } from './evaluate.js';
import { renderMarkdown } from './markdown.js';
import { formatFlag, scanPatch, staticTestModifications } from './scan.js';
import { classifyPatch, joinPatch, splitPatch } from './split.js';
import type { RebuildPolicy } from '../config/repo-config.js';
import type { Cell, CellName, JudgeOptions, Parts, VerificationReport, Verdict } from './types.js';
import { VerificationReportSchema } from './types.js';
import { stopwatch } from '../trace/phases.js';

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
const firstLines = (s: string, n = 3) => s.trim().split('\n').slice(0, n).join(' / ');

/** A report with no evidence yet; `finish` fills in the verdict. */
export function newReport(a: {
  mode: 'live' | 'task';
  runId: string;
  repo: string;
  baseCommit: string;
  patch: string;
  testGlobs?: string[];
}) {
  const { tests, sources } = classifyPatch(a.patch, a.testGlobs);
  const report: VerificationReport = {
    verdict: 'infra_error',
    reason: '',
    base_commit: a.baseCommit,
    flags: scanPatch(splitPatch(a.patch)).map(formatFlag),
    mode: a.mode,
    run_id: a.runId,
    repo: a.repo,
    per_test: false,
    patch: {
      files: patchFiles(a.patch),
      test_files: tests.map((s) => s.path),
      source_files: sources.map((s) => s.path),
    },
    tests_modified: [],
    image: null,
    build_error: null,
    cells: [],
    evidence: { reproduced: [], regressions: [], new_tests_failing: [], fail_both: [], flaky: [] },
    task: null,
    phases: null,
    commands: [],
    duration_ms: 0,
    started_at: new Date().toISOString(),
  };
  clocks.set(report, stopwatch());
  return report;
}

/** Each report's stopwatch, started with it (durations on the monotonic clock, not from started_at). */
const clocks = new WeakMap<VerificationReport, () => number>();

/** Sets the verdict and validates the whole report against its schema. */
export function finish(report: VerificationReport, verdict: Verdict, reason: string): VerificationReport {
  report.verdict = verdict;
  report.reason = reason;
  report.per_test = report.cells.length > 0 && report.cells.every((c) => c.per_test);
  report.duration_ms = clocks.get(report)?.() ?? 0;
  return VerificationReportSchema.parse(report);
}

/** The verdict of an environment that did not build: the Dockerfile's, unless the engine was gone. */
export function unbuilt(
  report: VerificationReport,
  build: BuildResult,
): ['infra_error' | 'build_failed', string] {
  const first = firstLines(report.build_error ?? '', 1);
  return build.engine_gone
    ? ['infra_error', `The Docker engine could not be reached while building: ${first}`]
    : ['build_failed', `The Dockerfile does not build from scratch: ${first}`];
}

/** The infra_error reason for an exception: an isolation breach is named as such. */
export function infraReason(err: unknown): string {
  if (err instanceof CellIsolationError)
    return `Sandbox isolation was violated during a test run (${err.message}); no result of this judge stands.`;
  if (err instanceof CellInfraError) return `The judge could not run the tests: ${err.message}.`;
  return `The judge itself failed: ${message(err)}`;
}

/** Worktrees of one judge call, all removed at the end whatever happens. */
export class Worktrees {
  private readonly created: Worktree[] = [];
  constructor(readonly manager: GitWorkspaceManager) {}
  async create(remote: string, sha: string, runId: string): Promise<Worktree> {
    return (await this.createMany(remote, sha, [runId]))[0]!;
  }
  async createMany(remote: string, sha: string, runIds: string[]): Promise<Worktree[]> {
    const wts = await this.manager.createMany(remote, sha, runIds);
    this.created.push(...wts);
    return wts;
  }
  /**
   * The worktrees made ahead (`ready`), taken over when they are these very ones (same remote, commit and
   * names, in order); else they go and fresh ones are made.
   */
  async adopt(ready: Worktree[] | null, remote: string, sha: string, runIds: string[]): Promise<Worktree[]> {
    if (!ready) return this.createMany(remote, sha, runIds);
    this.created.push(...ready);
    const fit =
      ready.length === runIds.length &&
      ready.every((wt, i) => wt.runId === runIds[i] && wt.baseCommit === sha && wt.remote === remote);
    if (fit) return ready;
    await this.removeAll();
    return this.createMany(remote, sha, runIds);
  }
  async removeAll(): Promise<void> {
    await this.manager.removeMany(this.created.splice(0)).catch(() => undefined);
  }
}

/**
 * Builds the environment image from the Dockerfile with the given worktree as context, or reuses one
 * with the same content key (see RebuildPolicy); `always` builds without the engine's layer cache. The
 * image is leased to the judge's run until `dispose`, which also removes an image built for this judge
 * alone (its no-cache tag): no later judge reuses it, so keeping it would only fill the disk. A shared
 * image is only released.
 */
export async function buildEnvironment(
  report: VerificationReport,
  a: Pick<Parts, 'images' | 'sandboxes'> & {
    config: Config;
    dockerfile: string;
    worktree: string;
    runId: string;
    rebuild?: RebuildPolicy;
    signal?: AbortSignal;
  },
): Promise<{ build: BuildResult; sandbox: Sandbox | null; dispose: () => Promise<void> }> {
  const builder = a.images;
  const noCache = a.rebuild === 'always';
  report.commands.push(`docker build${noCache ? ' --no-cache' : ''} (context: ${a.worktree})`);
  const build = await builder.build({
    dockerfile: a.dockerfile,
    worktree: a.worktree,
    runId: a.runId,
    noCache,
    signal: a.signal,
  });
  const dispose = async () => {
    await builder.release(a.runId).catch(() => undefined);
    if (noCache && build.image_tag) await builder.removeImage(build.image_tag);
  };
  if (!build.success || !build.image_id) {
    report.build_error = [
      build.error ?? 'build failed',
      ...build.log.error_lines,
      ...build.log.tail.slice(-10),
    ].join('\n');
    return { build, sandbox: null, dispose };
  }
  report.image = {
    id: build.image_id,
    tag: build.image_tag,
    no_cache: noCache,
    reused: build.cache_hit,
    build_ms: build.duration_ms,
    dockerfile_sha256: createHash('sha256').update(a.dockerfile).digest('hex'),
    network: build.network,
  };
  return { build, sandbox: a.sandboxes.container(build.image_id, a.runId), dispose };
}

/**
 * The judge's cell worktrees at the base commit, made before the judge runs (while the agent works:
 * they need no patch) and handed to it as JudgeOptions.worktrees. Whoever holds them removes them.
 */
export async function prepareWorktrees(
  o: Pick<JudgeOptions, 'workspaces' | 'remote' | 'baseCommit'> & { runId: string },
): Promise<Worktree[]> {
  const base = await o.workspaces.resolve(o.remote, o.baseCommit);
  return o.workspaces.createMany(o.remote, base, cellRunIds(o.runId));
}

/** The cells' worktree names, in the order they are made (see CELLS). */
const cellRunIds = (runId: string) => [...CELLS].reverse().map((cell) => `${runId}-${cell.name}`);

/** In the order of the evidence table; worktrees are prepared in reverse, so the full patch is tried first. */
const CELLS: ReadonlyArray<{
  name: CellName;
  source: 'base' | 'patched';
  tests: 'base' | 'patch';
  label: string;
}> = [
  { name: 'base', source: 'base', tests: 'base', label: 'base' },
  { name: 'patched_source', source: 'patched', tests: 'base', label: "patch's source changes" },
  { name: 'patch_tests', source: 'base', tests: 'patch', label: "patch's test changes" },
  { name: 'patched', source: 'patched', tests: 'patch', label: 'candidate patch' },
];

/**
 * How many cells run at once: as many as the host's CPUs hold at the CPUs one cell really keeps busy
 * (the sandbox's limit, or fewer when the runner's own worker count says so: see runCpus) and its
 * memory at the sandbox limit, at least one. More would not be faster: the cells would share CPUs
 * and each would run into its time limit.
 */
export function cellConcurrency(
  config: Pick<Config, 'sandbox'>,
  argv: readonly string[],
  host = { cpus: availableParallelism(), memory: totalmem() },
): number {
  const byCpu = Math.floor(host.cpus / runCpus(argv, config.sandbox.nanoCpus / 1e9));
  const byMemory = Math.floor(host.memory / config.sandbox.memoryBytes);
  return Math.max(1, Math.min(CELLS.length, byCpu, byMemory));
}

/**
 * Runs `fn` over `items`, at most `limit` at a time. Every started call is awaited before the first
 * error is rethrown, so nothing is still running when the caller cleans up; no new call starts after one failed.
 * Not p-limit (issue 39): that needs `rejectOnClear`, `Promise.allSettled` and telling its AbortErrors from the
 * failure, no shorter than this loop, for one caller with four cells.
 */
export async function inPool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: { err: unknown } | null = null;
  const worker = async () => {
    while (next < items.length && !failure) {
      const item = items[next++]!;
      await fn(item).catch((err: unknown) => {
        failure ??= { err };
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw (failure as { err: unknown }).err;
}

/**
 * The independent judge (live mode): four cells — {base, patched} source × {base, patch's} tests —
 * each in a fresh worktree at the base commit, all in containers of one image of the final Dockerfile
 * (reused or rebuilt, see RebuildPolicy). Expected failures are verdicts, never exceptions. The report is always
 * recorded in `<runsDir>/<runId>/report.json` and `report.md`.
 */
export async function judge(opts: JudgeOptions): Promise<VerificationReport> {
  const runId = opts.runId ?? newRunId('verify');
  const report = await decide(opts, runId);
  const dir = path.join(opts.config.runsDir, runId);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(path.join(dir, 'report.md'), renderMarkdown(report));
  return report;
}

async function decide(opts: JudgeOptions, runId: string): Promise<VerificationReport> {
  const report = newReport({
    mode: 'live',
    runId,
    repo: opts.remote,
    baseCommit: opts.baseCommit,
    patch: opts.patch,
    testGlobs: opts.testGlobs,
  });
  const phases = { worktrees_ms: 0, build_ms: 0, cells_ms: 0, cells_at_once: 1, cell_limit_s: 0 };
  report.phases = phases;
  const sections = splitPatch(opts.patch);
  if (opts.patch.trim() === '') return finish(report, 'empty_patch', 'The candidate patch changes nothing.');
  if (sections.length === 0)
    return finish(report, 'patch_does_not_apply', 'The candidate patch has no `diff --git` section.');
  const { tests, sources } = classifyPatch(opts.patch, opts.testGlobs);
  const patches: Record<CellName, string> = {
    base: '',
    patched_source: joinPatch(sources),
    patch_tests: joinPatch(tests),
    patched: opts.patch,
  };
  const worktrees = new Worktrees(opts.workspaces);
  let dispose = async () => {};
  try {
    const base = await worktrees.manager.resolve(opts.remote, opts.baseCommit);
    report.base_commit = base;
    const paths = {} as Record<CellName, string>;
    let lap = stopwatch();
    const order = [...CELLS].reverse(); // the full patch's failure to apply is the one reported
    const ready = opts.worktrees ? await opts.worktrees().catch(() => null) : null;
    const wts = await worktrees.adopt(ready, opts.remote, base, cellRunIds(runId));
    const applied = await Promise.all(
      order.map((cell, i) => {
        const wt = wts[i]!;
        paths[cell.name] = wt.path;
        report.commands.push(`git worktree add --detach ${wt.path} ${base}`);
        if (!patches[cell.name]) return null;
        report.commands.push(`git apply --binary (${cell.label}) in ${wt.path}`);
        return applyPatch(wt, patches[cell.name]);
      }),
    );
    const refused = applied.findIndex((a) => a?.ok === false);
    if (refused >= 0)
      return finish(
        report,
        'patch_does_not_apply',
        `The ${order[refused]!.label} does not apply to ${base.slice(0, 12)}: ${firstLines(applied[refused]!.error ?? '')}`,
      );

    phases.worktrees_ms = lap();
    lap = stopwatch();
    const { sandbox, ...env } = await buildEnvironment(report, { ...opts, worktree: paths.patched, runId });
    dispose = env.dispose;
    phases.build_ms = lap();
    if (!sandbox) return finish(report, ...unbuilt(report, env.build));

    const cells = {} as Record<CellName, Cell>;
    let suiteMs = opts.suiteMs ?? null;
    const ceiling = opts.config.limits.maxTestTimeoutMs;
    const runOne = async (
      cell: (typeof CELLS)[number],
      timeoutMs = testLimitMs(opts.config.limits, suiteMs),
    ) => {
      if (opts.signal?.aborted) return;
      cells[cell.name] = await runCell(
        { name: cell.name, source: cell.source, tests: cell.tests },
        {
          sandbox,
          worktree: paths[cell.name],
          argv: opts.testArgv,
          timeoutMs,
          maxOutputBytes: opts.config.limits.maxOutputBytes,
          maxReportBytes: opts.config.verify.maxReportBytes,
          reruns: opts.config.verify.flakyReruns,
          allowEmpty: cell.tests === 'base',
          signal: opts.signal,
        },
      );
    };
    lap = stopwatch();
    phases.cells_at_once = cellConcurrency(opts.config, opts.testArgv);
    let rest: readonly (typeof CELLS)[number][] = CELLS;
    if (suiteMs === null) {
      // No run measured the suite (task mode, eval, `verify`): the base cell runs first at the ceiling
      // and measures it, so a hanging cell after it waits for the derived limit, not the ceiling.
      const base = CELLS.find((c) => c.name === 'base')!;
      await runOne(base);
      const measured = cells.base;
      if (measured && (measured.status === 'passed' || measured.status === 'failed'))
        suiteMs = measured.duration_ms / measured.runs;
      rest = CELLS.filter((c) => c !== base);
    }
    const limit = testLimitMs(opts.config.limits, suiteMs);
    phases.cell_limit_s = Math.round(limit / 1000);
    await inPool(rest, phases.cells_at_once, (cell) => runOne(cell));
    // A cell that timed out at the derived limit may have lost only to the load beside it (other cells,
    // other jobs): before any verdict it runs once more alone, at the ceiling.
    for (const cell of limit < ceiling ? rest : []) {
      if (cells[cell.name]?.status !== 'timeout') continue;
      await runOne(cell, ceiling);
      if (cells[cell.name])
        cells[cell.name].retimed =
          `timed out at the derived ${phases.cell_limit_s} s limit (${phases.cells_at_once} cell(s) at once); ` +
          `re-run alone at the ${Math.round(ceiling / 1000)} s ceiling: ${cells[cell.name].status}`;
    }
    phases.cells_ms = lap();
    if (opts.signal?.aborted) return finish(report, 'infra_error', 'The judge was cancelled.');
    for (const cell of CELLS) {
      report.cells.push(cells[cell.name]);
      report.commands.push(`[${cell.name}] ${cells[cell.name].argv.join(' ')}`);
    }
    const judged = evaluate(cells, staticTestModifications(tests), tests.length > 0);
    report.evidence = judged.evidence;
    report.tests_modified = judged.tests_modified;
    const retimed = CELLS.filter((c) => cells[c.name].retimed).map(
      (c) => `${c.name} ${cells[c.name].retimed}`,
    );
    return finish(report, judged.verdict, [judged.reason, ...retimed.map((r) => `(${r}.)`)].join(' '));
  } catch (err) {
    return finish(report, 'infra_error', infraReason(err));
  } finally {
    // Nothing runs in the worktrees or containers any more: the verdict does not wait for them to go.
    let cleanup: Promise<void> | null = null;
    const start = () => (cleanup ??= Promise.all([dispose(), worktrees.removeAll()]).then(() => undefined));
    if (opts.afterward) opts.afterward(start);
    else await start();
  }
}
