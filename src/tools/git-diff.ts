import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { exportPatch } from '../patch/patch.js';
import { TraceError } from '../trace/trace.js';
import { cutText } from './observation.js';
import { ok, type ToolDefinition } from './types.js';

/** Enough of the diff to review a typical fix; the whole patch is in the run directory. */
const PREVIEW_CHARS = 10_000;
/** Paths listed in the result; the patch file names them all. */
const MAX_LISTED_FILES = 500;

const DiffArgs = z.strictObject({});

export const gitDiff: ToolDefinition<typeof DiffArgs> = {
  name: 'git_diff',
  description:
    'Show your changes so far as a unified diff against the base commit (the patch that would be proposed).',
  args: DiffArgs,
  mutates: false,
  async run(ctx) {
    const { patch, files, skipped } = await exportPatch(
      { path: ctx.worktree, gitDir: ctx.gitDir },
      ctx.baseCommit,
      { maxFileBytes: ctx.limits.maxPatchFileBytes },
    );
    const patchPath = path.join(ctx.runDir, 'current.patch');
    try {
      writeFileSync(patchPath, patch);
    } catch (err) {
      // The run directory holds the evidence; losing it ends the run like an unwritable trace.
      throw new TraceError(`cannot write ${patchPath}: ${(err as Error).message}`);
    }
    const preview = cutText(patch, PREVIEW_CHARS);
    const truncated = preview !== patch || files.length > MAX_LISTED_FILES;
    return ok(
      {
        base_commit: ctx.baseCommit,
        patch_path: patchPath,
        files: files.slice(0, MAX_LISTED_FILES),
        ...(files.length > MAX_LISTED_FILES ? { files_total: files.length } : {}),
        // Left out of the patch: new or changed files over the limit, nested repositories.
        skipped,
        max_file_bytes: ctx.limits.maxPatchFileBytes,
        preview,
      },
      truncated,
    );
  },
};
