import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { applyPatch, patchFiles } from '../patch/patch.js';
import { worktreeGit } from '../workspace/git.js';
import type { WorktreeGit } from '../workspace/types.js';
import { runCell } from './cells.js';
import { splitArgv } from './argv.js';
import { needsShell } from '../testrunners/reports/shell.js';
import { gradeRow } from './test-ids.js';
import { newRunId } from '../trace/ids.js';
import { buildEnvironment, finish, infraReason, newReport, unbuilt, Worktrees } from './judge.js';
import type { RebuildPolicy } from '../config/repo-config.js';
import type { Parts, VerificationReport } from './types.js';

/** SWE-bench stores test lists as JSON-encoded strings; plain arrays are accepted too. */
const IdList = z.union([
  z.array(z.string()),
  z.string().transform((s, ctx) => {
    let data: unknown;
    try {
      data = JSON.parse(s || '[]');
    } catch {
      data = null;
    }
    const parsed = z.array(z.string()).safeParse(data);
    if (!parsed.success) ctx.addIssue({ code: 'custom', message: 'expected a JSON list of test ids' });
    return parsed.data ?? [];
  }),
]);

/**
 * A task row. Required fields are strict; other keys are ignored, as datasets of the SWE-bench family carry
 * many (language, setup and version fields, hints, image names…): those of SWE-bench itself silently, any
 * other with one warning per file.
 */
export const TaskSchema = z.object({
  instance_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/, 'instance_id must be a safe file name'),
  repo: z.string().min(1),
  base_commit: z.string().min(1),
  problem_statement: z.string(),
  test_patch: z.string(),
  FAIL_TO_PASS: IdList,
  PASS_TO_PASS: IdList.default([]),
  /** argv, or one string split like a shell would (quotes, no expansion). */
  test_command: z.union([z.array(z.string()).min(1), z.string().min(1)]),
  /** Dockerfile text of the environment. */
  dockerfile: z.string().optional(),
});
export type Task = z.infer<typeof TaskSchema>;

/** SWE-bench's own fields the grader does not use: ignored without a warning. */
const SWE_BENCH_UNUSED = new Set([
  'patch',
  'hints_text',
  'created_at',
  'version',
  'environment_setup_commit',
]);

/** A GitHub `owner/name` becomes its URL; other relative locations are relative to the task file. */
function resolveRepo(repo: string, dir: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(repo) || path.isAbsolute(repo)) return repo;
  const local = path.resolve(dir, repo);
  if (existsSync(local)) return local;
  return /^[\w.-]+\/[\w.-]+$/.test(repo) ? `https://github.com/${repo}` : local;
}

/**
 * Reads a JSON Lines task file; an invalid line fails the whole file with its line number. Keys that no
 * field takes are named once for the whole file through `warn`.
 */
export async function loadTasks(
  jsonlPath: string,
  warn: (message: string) => void = () => undefined,
): Promise<Task[]> {
  const text = await readFile(jsonlPath, 'utf8');
  const tasks: Task[] = [];
  const ignored = new Set<string>();
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let data: unknown;
    try {
      data = JSON.parse(line);
    } catch (err) {
      throw new Error(`${jsonlPath}:${i + 1}: not JSON: ${(err as Error).message}`);
    }
    const parsed = TaskSchema.safeParse(data);
    if (!parsed.success) {
      const issues = parsed.error.issues
        .map((x) => `${x.path.join('.') || '(line)'}: ${x.message}`)
        .join('; ');
      throw new Error(`${jsonlPath}:${i + 1}: invalid task: ${issues}`);
    }
    for (const key of Object.keys(data as object))
      if (!(key in TaskSchema.shape) && !SWE_BENCH_UNUSED.has(key)) ignored.add(key);
    tasks.push({
      ...parsed.data,
      repo: resolveRepo(parsed.data.repo, path.dirname(path.resolve(jsonlPath))),
    });
  }
  if (ignored.size > 0)
    warn(`${jsonlPath}: ignored fields no task field takes: ${[...ignored].sort().join(', ')}`);
  return tasks;
}

/** A command line with shell syntax (rows are the operator's trusted input), else null. */
const shellLine = (t: Task): string | null =>
  typeof t.test_command === 'string' && needsShell(t.test_command) ? t.test_command : null;

/** The row's command as its author wrote it: argv, words split like a shell, or `sh -c` for shell syntax. */
export const taskArgv = (t: Task): string[] => {
  const line = shellLine(t);
  if (line !== null) return ['sh', '-c', line];
  return Array.isArray(t.test_command) ? t.test_command : splitArgv(t.test_command);
};

export interface GradeOptions extends Parts {
  /** Overrides the task's Dockerfile (e.g. the one the agent's run ended with). */
  dockerfile?: string;
  /** Directory of report.json (default: <runsDir>/<runId>). */
  outDir?: string;
  runId?: string;
  rebuild?: RebuildPolicy;
  signal?: AbortSignal;
}

/**
 * Puts the test files the test patch touches back to the base, as SWE-bench does before applying it.
 * Git does the removing too: the candidate may have made a directory on the way a link out of the tree,
 * and git never goes through one (fs.rm did). Paths are literal, never globs.
 */
async function resetTestFiles(wt: WorktreeGit, base: string, testPatch: string): Promise<void> {
  const env = { GIT_LITERAL_PATHSPECS: '1' };
  for (const f of patchFiles(testPatch)) {
    const exists = await worktreeGit(wt, ['cat-file', '-e', `${base}:${f}`], { allowFail: true });
    if (exists.exitCode === 0) await worktreeGit(wt, ['checkout', base, '--', f], { env });
    // Refused beyond a link: the test patch then does not apply, and the grade says so.
    else await worktreeGit(wt, ['clean', '-f', '-x', '-q', '--', f], { env, allowFail: true });
  }
}

/**
 * Grades a candidate patch on a benchmark task as SWE-bench does: candidate applied, test files of
 * the test patch reset to the base, test patch applied, tests run once; resolved only if every
 * FAIL_TO_PASS passes and every PASS_TO_PASS passes or is skipped. Writes report.json.
 * Verdicts: verified (resolved), regression (a PASS_TO_PASS fails), no_reproduction (a FAIL_TO_PASS
 * does not pass), or the live-mode error verdicts.
 */
export async function gradeInstance(
  task: Task,
  candidatePatch: string,
  config: Config,
  opts: GradeOptions,
): Promise<VerificationReport> {
  const runId = opts.runId ?? newRunId(`task-${task.instance_id}`.slice(0, 100));
  const report = newReport({
    mode: 'task',
    runId,
    repo: task.repo,
    baseCommit: task.base_commit,
    patch: candidatePatch,
  });
  const F2P = task.FAIL_TO_PASS;
  const P2P = task.PASS_TO_PASS;
  report.task = {
    instance_id: task.instance_id,
    resolved: false,
    FAIL_TO_PASS: { success: [], failure: [...F2P], missing: [] },
    PASS_TO_PASS: { success: [], failure: [...P2P], missing: [] },
  };
  const done = async (verdict: VerificationReport['verdict'], reason: string) => {
    const final = finish(report, verdict, reason);
    const dir = opts.outDir ?? path.join(config.runsDir, runId);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'report.json'), `${JSON.stringify(final, null, 2)}\n`);
    return final;
  };
  if (candidatePatch.trim() === '') return done('empty_patch', 'The candidate patch is empty.');
  const dockerfile = opts.dockerfile ?? task.dockerfile;
  if (!dockerfile) return done('build_failed', 'The task has no Dockerfile and none was given.');

  const worktrees = new Worktrees(opts.workspaces);
  let dispose = async () => {};
  try {
    const base = await worktrees.manager.resolve(task.repo, task.base_commit);
    report.base_commit = base;
    const wt = await worktrees.create(task.repo, base, runId);
    report.commands.push(
      `git worktree add --detach ${wt.path} ${base}`,
      'git apply --binary (candidate patch)',
    );
    const applied = await applyPatch(wt, candidatePatch);
    if (!applied.ok)
      return done(
        'patch_does_not_apply',
        `The candidate patch does not apply: ${applied.error ?? ''}`.trim(),
      );
    report.commands.push(
      'git checkout <base> -- (test files of test_patch)',
      'git apply --binary (test_patch)',
    );
    await resetTestFiles(wt, base, task.test_patch);
    const testApplied = await applyPatch(wt, task.test_patch);
    if (!testApplied.ok)
      return done(
        'infra_error',
        `The task's test_patch does not apply after the candidate: ${testApplied.error ?? ''}`,
      );

    const { sandbox, ...env } = await buildEnvironment(report, {
      images: opts.images,
      sandboxes: opts.sandboxes,
      config,
      dockerfile,
      worktree: wt.path,
      runId,
      rebuild: opts.rebuild,
      signal: opts.signal,
    });
    dispose = env.dispose;
    if (!sandbox) return done(...unbuilt(report, env.build));

    const cell = await runCell(
      { name: 'graded', source: 'patched', tests: 'patch' },
      {
        sandbox,
        worktree: wt.path,
        argv: taskArgv(task),
        shell: shellLine(task) ?? undefined,
        timeoutMs: config.limits.maxTestTimeoutMs,
        maxOutputBytes: config.limits.maxOutputBytes,
        maxReportBytes: config.verify.maxReportBytes,
        reruns: 0, // graded once, as SWE-bench does
        allowEmpty: false,
        signal: opts.signal,
      },
    );
    report.cells.push(cell);
    report.commands.push(`[graded] ${cell.argv.join(' ')}`);
    if (cell.problem) return done('invalid_test_run', `The test run cannot be trusted: ${cell.problem}.`);

    const graded = gradeRow(F2P, P2P, cell);
    report.task = { ...report.task, ...graded.grade };
    return done(graded.verdict, graded.reason);
  } catch (err) {
    return done('infra_error', infraReason(err));
  } finally {
    await dispose();
    await worktrees.removeAll();
  }
}

export interface RunSummary {
  total_instances: number;
  completed_instances: number;
  resolved_instances: number;
  unresolved_instances: number;
  empty_patch_instances: number;
  error_instances: number;
  resolved_ids: string[];
  unresolved_ids: string[];
  empty_patch_ids: string[];
  error_ids: string[];
}

const ERROR_VERDICTS = new Set(['patch_does_not_apply', 'build_failed', 'invalid_test_run', 'infra_error']);

/** The run summary, shaped like SWE-bench's: errors are instances that could not be graded. */
export function summarize(reports: readonly VerificationReport[]): RunSummary {
  const ids = (pred: (r: VerificationReport) => boolean) =>
    reports.filter(pred).map((r) => r.task?.instance_id ?? r.run_id);
  const empty = ids((r) => r.verdict === 'empty_patch');
  const errors = ids((r) => ERROR_VERDICTS.has(r.verdict));
  const resolved = ids((r) => r.task?.resolved === true);
  const unresolved = ids(
    (r) => r.task?.resolved !== true && r.verdict !== 'empty_patch' && !ERROR_VERDICTS.has(r.verdict),
  );
  return {
    total_instances: reports.length,
    completed_instances: resolved.length + unresolved.length,
    resolved_instances: resolved.length,
    unresolved_instances: unresolved.length,
    empty_patch_instances: empty.length,
    error_instances: errors.length,
    resolved_ids: resolved,
    unresolved_ids: unresolved,
    empty_patch_ids: empty,
    error_ids: errors,
  };
}
