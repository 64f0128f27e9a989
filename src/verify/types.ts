import type { Config } from '../config/config.js';

export type Verdict =
  | 'verified'
  | 'no_reproduction'
  | 'regression'
  | 'tests_modified'
  | 'patch_does_not_apply'
  | 'empty_patch'
  | 'build_failed'
  | 'invalid_test_run'
  | 'infra_error';

export interface JudgeOptions {
  config: Config;
  remote: string; // repository (local path or URL)
  baseCommit: string; // full SHA
  patch: string; // candidate patch text
  dockerfile: string; // the environment's Dockerfile, rebuilt without cache
  testArgv: string[];
  runId?: string;
  signal?: AbortSignal;
}

export interface VerificationReport {
  verdict: Verdict;
  reason: string; // one sentence with the evidence behind the verdict
  base_commit: string;
  flags: string[]; // suspicious-patch scan results
  /** Full machine-readable evidence (cells, flipped tests, regressions, flaky, image digest, commands, durations). */
  [k: string]: unknown;
}
