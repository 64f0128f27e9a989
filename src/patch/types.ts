import type { SkippedFile } from '../workspace/stage.js';

export type { SkippedFile };

/**
 * Patch export and application. Export never touches the worktree's own index (temporary GIT_INDEX_FILE)
 * nor the mirror's object store (temporary GIT_OBJECT_DIRECTORY).
 */
export interface ExportedPatch {
  /** `git diff --binary` text against the base commit; empty string when nothing changed. */
  patch: string;
  /** Paths touched by the patch, relative to the worktree root. */
  files: string[];
  /** Tree id of the worktree content as exported (the "workspace revision"); an id only, the object is not kept. */
  tree: string;
  /** What was left out of the patch (and never stored anywhere). */
  skipped: SkippedFile[];
}

export interface ApplyResult {
  ok: boolean;
  error: string | null;
}

/** Paths that never enter a patch, whatever .gitignore says. */
export const ALWAYS_EXCLUDED = [
  '.venv',
  '__pycache__',
  '.pytest_cache',
  '.ruff_cache',
  '.mypy_cache',
  'node_modules',
  '.DS_Store',
] as const;
