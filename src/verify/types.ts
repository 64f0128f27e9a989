import { z } from 'zod';
import type { Config } from '../config/config.js';
import type { RebuildPolicy } from '../config/repo-config.js';
import type { SandboxFactory } from '../environment/types.js';
import type { DockerEnvironmentBuilder } from '../images/builder.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import type { Worktree } from '../workspace/types.js';
import { RunnerSchema, TestResultSchema } from '../testrunners/reports/types.js';

export const VerdictSchema = z.enum([
  'verified',
  'no_reproduction',
  'regression',
  'tests_modified',
  'patch_does_not_apply',
  'empty_patch',
  'build_failed',
  'invalid_test_run',
  'infra_error',
]);
export type Verdict = z.infer<typeof VerdictSchema>;

/**
 * The parts a process's runs and judges share, built once by src/cli/compose.ts: the mirrors and
 * worktrees, the image builder (and its leases) and the sandboxes.
 */
export interface Parts {
  workspaces: GitWorkspaceManager;
  images: DockerEnvironmentBuilder;
  sandboxes: SandboxFactory;
}

/** The parts alone (of a larger object that has them), as the repair and the judge are handed them. */
export const partsOf = ({ workspaces, images, sandboxes }: Parts): Parts => ({
  workspaces,
  images,
  sandboxes,
});

export interface JudgeOptions extends Parts {
  config: Config;
  remote: string; // repository (local path or URL)
  baseCommit: string; // any revision; resolved to a full SHA
  patch: string; // candidate patch text
  dockerfile: string; // the environment's Dockerfile
  testArgv: string[];
  runId?: string;
  signal?: AbortSignal;
  /** Repository globs that also hold tests (added to the built-in rules of split.ts). */
  testGlobs?: string[];
  /** Default `changed`. */
  rebuild?: RebuildPolicy;
  /** The agent's measured full suite: the cells' limit derives from it (see testLimitMs); unknown: the ceiling. */
  suiteMs?: number | null;
  /**
   * Takes the giving back of the judge's worktrees and image lease, which then goes on after the judge
   * returns (beside publishing): the caller `start`s it when it suits it (once; a second call returns
   * the same promise) and awaits it before its run ends. Without it the judge does both.
   */
  afterward?: (start: () => Promise<void>) => void;
  /**
   * Takes over the cells' worktrees made ahead (prepareWorktrees; null: none were made): the judge uses
   * them when they are its own (same remote, base commit and names) and removes them either way.
   */
  worktrees?: () => Promise<Worktree[] | null>;
}

/** The four cells of live mode: which source and which tests each one runs. */
export const CellNameSchema = z.enum(['base', 'patched_source', 'patch_tests', 'patched']);
export type CellName = z.infer<typeof CellNameSchema>;

const Counts = z.strictObject({
  passed: z.number().int(),
  failed: z.number().int(),
  errors: z.number().int(),
  skipped: z.number().int(),
});

export const CellSchema = z.strictObject({
  name: z.string(),
  source: z.enum(['base', 'patched']),
  tests: z.enum(['base', 'patch']),
  argv: z.array(z.string()),
  exit_code: z.number().int().nullable(),
  status: z.enum(['passed', 'failed', 'timeout', 'error', 'cancelled']),
  /** Total runs of the cell: 1 plus flaky re-runs. */
  runs: z.number().int(),
  duration_ms: z.number(),
  runner: RunnerSchema,
  per_test: z.boolean(),
  report_source: z.string(),
  counts: Counts,
  results: z.array(TestResultSchema),
  flaky: z.array(z.string()),
  /** Why the cell's results cannot be trusted (cross-check with the exit code, timeout…), else null. */
  problem: z.string().nullable(),
  /** Set when the cell timed out at the derived limit and was run again alone at the ceiling (its results are that run's). */
  retimed: z.string().optional(),
  output_tail: z.string(),
});
export type Cell = z.infer<typeof CellSchema>;

export const EvidenceSchema = z.strictObject({
  /** The patch's new tests that fail (or error) on the base source and pass on the patched source. */
  reproduced: z.array(z.string()),
  /** Tests that passed on the base and fail, error or vanish with the patch. */
  regressions: z.array(z.string()),
  /** The patch's new tests that do not pass on the patched source. */
  new_tests_failing: z.array(z.string()),
  /** Base tests failing both before and after the patch: reported, not blamed on the patch. */
  fail_both: z.array(z.string()),
  /** Tests whose result changed across re-runs of one cell: excluded from everything above. */
  flaky: z.array(z.string()),
});
export type Evidence = z.infer<typeof EvidenceSchema>;

const IdLists = z.strictObject({
  success: z.array(z.string()),
  failure: z.array(z.string()),
  /** Ids the run's report does not contain (see test-ids.ts): never counted as failing. */
  missing: z.array(z.string()),
});
export const TaskGradeSchema = z.strictObject({
  instance_id: z.string(),
  resolved: z.boolean(),
  FAIL_TO_PASS: IdLists,
  PASS_TO_PASS: IdLists,
});
export type TaskGrade = z.infer<typeof TaskGradeSchema>;

export const VerificationReportSchema = z.strictObject({
  verdict: VerdictSchema,
  /** One sentence with the evidence behind the verdict. */
  reason: z.string(),
  base_commit: z.string(),
  /** Suspicious-patch scan results (see scan.ts); they never change the verdict. */
  flags: z.array(z.string()),
  mode: z.enum(['live', 'task']),
  run_id: z.string(),
  repo: z.string(),
  per_test: z.boolean(),
  patch: z.strictObject({
    files: z.array(z.string()),
    test_files: z.array(z.string()),
    source_files: z.array(z.string()),
  }),
  /** Why the patch's tests cannot count as evidence (edits to existing tests); empty when they can. */
  tests_modified: z.array(z.string()),
  image: z
    .strictObject({
      id: z.string(),
      tag: z.string().nullable(),
      no_cache: z.boolean(),
      /** An image with the same content key was reused (no build ran). */
      reused: z.boolean(),
      build_ms: z.number(),
      dockerfile_sha256: z.string(),
      /** Whether the builder gave the build a proxy / an extra CA (AGENTICFIX_BUILD_PROXY, _CA_FILE). */
      network: z.strictObject({ proxy: z.boolean(), ca: z.boolean() }).optional(),
    })
    .nullable(),
  build_error: z.string().nullable(),
  cells: z.array(CellSchema),
  evidence: EvidenceSchema,
  task: TaskGradeSchema.nullable(),
  /** Live mode: wall time of each phase (cells run concurrently, so `cells_ms` is less than their sum). */
  phases: z
    .strictObject({
      worktrees_ms: z.number(),
      build_ms: z.number(),
      cells_ms: z.number(),
      /** How many cells ran at once (see cellConcurrency). */
      cells_at_once: z.number().int().positive(),
      /** The time limit of the cells after the first: derived from the measured suite (see time-limits.ts). */
      cell_limit_s: z.number().int().nonnegative(),
    })
    .nullable(),
  /** What the judge ran, in order (git, docker, test argv). */
  commands: z.array(z.string()),
  duration_ms: z.number(),
  started_at: z.string(),
});
export type VerificationReport = z.infer<typeof VerificationReportSchema>;
