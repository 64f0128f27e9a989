import {
  closeSync,
  constants,
  ftruncateSync,
  openSync,
  realpathSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { z } from 'zod';
import { fileVersion, isLoaded, loadFile, numberLines, sameFile, splitLines } from './files.js';
import { mkdirSafe, pathError, protectedPathError, relPath, resolveInWorktree } from './paths.js';
import { fail, ok, type ToolDefinition } from './types.js';

const version = z
  .string()
  .regex(/^[0-9a-f]{16}$/, 'must be the 16-hex `version` returned by read_file')
  .describe('The `version` read_file returned for this file');

const CONTEXT_LINES = 3;

/**
 * Writes through the existing inode (mode and ownership stay), never through a link, and only if it
 * is still the file that was read (false otherwise).
 */
function overwrite(abs: string, data: string, seen: Stats): boolean {
  const fd = openSync(abs, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!sameFile(fd, seen)) return false;
    ftruncateSync(fd);
    writeSync(fd, data);
    return true;
  } finally {
    closeSync(fd);
  }
}

const EditArgs = z.strictObject({
  path: relPath,
  old_text: z.string().min(1).describe('Exact text to replace; must occur exactly once in the file'),
  new_text: z.string().describe('Replacement text'),
  version,
});

export const editFile: ToolDefinition<typeof EditArgs> = {
  name: 'edit_file',
  description:
    'Replace one exact occurrence of old_text with new_text in a file. Include enough surrounding lines ' +
    'to make old_text unique. `version` must be the one from your latest read_file of this file.',
  args: EditArgs,
  mutates: true,
  async run(ctx, args) {
    const f = loadFile(ctx, args.path, true);
    if (!isLoaded(f)) return f;
    const refused = protectedPathError(ctx, f.rel);
    if (refused) return refused;
    const text = f.buf.toString('utf8');
    // A CRLF file is edited in LF form so the model's LF text matches, then written back as CRLF.
    const crlf = text.includes('\r\n') && !/(^|[^\r])\n/.test(text);
    const lf = (s: string) => (crlf ? s.replace(/\r\n/g, '\n') : s);
    const body = lf(text);
    const oldText = lf(args.old_text);
    const newText = lf(args.new_text);

    if (oldText === newText) return fail('no_op', 'old_text and new_text are identical: nothing to change');
    if (args.version !== f.version) {
      return fail(
        'stale_version',
        `${f.rel} changed since that version was read (current version ${f.version}); re-read it with read_file`,
      );
    }
    const at = occurrences(body, oldText);
    if (at.length === 0) {
      const near = closest(body, oldText);
      const where = near.lines.map((l) => `${l.line}: ${l.text}`).join('\n');
      return fail(
        'no_match',
        near.whitespaceOnly
          ? `old_text not found exactly, but matches lines ${near.lines[0]?.line}-${near.lines.at(-1)?.line} ` +
              `if whitespace is ignored: only whitespace differs. Copy the exact text from read_file:\n${where}`
          : `old_text not found in ${f.rel}.` + (where ? ` Closest lines:\n${where}` : ''),
        { whitespace_only: near.whitespaceOnly, closest: near.lines },
      );
    }
    if (at.length > 1) {
      const lines = at.map((i) => lineOf(body, i));
      return fail(
        'multiple_matches',
        `old_text occurs ${at.length} times (lines ${lines.join(', ')}): add surrounding lines to make it unique`,
        { lines },
      );
    }
    const idx = at[0] as number;
    const result = body.slice(0, idx) + newText + body.slice(idx + oldText.length);
    const out = crlf ? result.replace(/\n/g, '\r\n') : result;
    const bytes = Buffer.byteLength(out);
    if (bytes > ctx.limits.maxFileBytes) {
      return fail(
        'too_large',
        `the result would have ${bytes} bytes, over the ${ctx.limits.maxFileBytes}-byte limit`,
      );
    }
    if (!overwrite(f.abs, out, f.stat)) {
      return fail('stale_version', `${f.rel} was replaced while being edited; re-read it with read_file`);
    }

    const first = lineOf(body, idx);
    const last = first + Math.max(0, newText.replace(/\n$/, '').split('\n').length - 1);
    const lines = splitLines(result);
    const from = Math.max(1, first - CONTEXT_LINES);
    const to = Math.min(lines.length, last + CONTEXT_LINES);
    return ok({
      path: f.rel,
      version: fileVersion(out),
      changed_lines: [first, last],
      region: numberLines(lines.slice(from - 1, to), from),
    });
  },
};

const CreateArgs = z.strictObject({
  path: relPath,
  content: z.string().describe('Full content of the new file'),
});

export const createFile: ToolDefinition<typeof CreateArgs> = {
  name: 'create_file',
  description:
    'Create a new file (missing parent directories are created). Fails if the path already exists.',
  args: CreateArgs,
  mutates: true,
  async run(ctx, args) {
    const r = resolveInWorktree(ctx.worktree, args.path, { forWrite: true });
    if (!r.ok) return pathError(r);
    const refused = protectedPathError(ctx, r.rel);
    if (refused) return refused;
    if (r.stat) return fail('already_exists', `${r.rel} already exists; use edit_file to change it`);
    const bytes = Buffer.byteLength(args.content);
    if (bytes > ctx.limits.maxFileBytes) {
      return fail('too_large', `content has ${bytes} bytes, over the ${ctx.limits.maxFileBytes}-byte limit`);
    }
    const bad = mkdirSafe(realpathSync(ctx.worktree), r.abs);
    if (bad) return pathError(bad);
    // O_EXCL also refuses a link or file that appeared since the check.
    const fd = openSync(
      r.abs,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644,
    );
    try {
      writeSync(fd, args.content);
    } finally {
      closeSync(fd);
    }
    return ok({
      path: r.rel,
      version: fileVersion(args.content),
      bytes,
      total_lines: splitLines(args.content).length,
    });
  },
};

const DeleteArgs = z.strictObject({ path: relPath, version });

export const deleteFile: ToolDefinition<typeof DeleteArgs> = {
  name: 'delete_file',
  description: 'Delete a file. `version` must be the one from your latest read_file of this file.',
  args: DeleteArgs,
  mutates: true,
  async run(ctx, args) {
    const f = loadFile(ctx, args.path, false);
    if (!isLoaded(f)) return f;
    const refused = protectedPathError(ctx, f.rel);
    if (refused) return refused;
    if (args.version !== f.version) {
      return fail('stale_version', `${f.rel} changed since that version was read; re-read it with read_file`);
    }
    unlinkSync(f.abs);
    return ok({ path: f.rel, deleted: true });
  },
};

/** Start offsets of every (also overlapping) occurrence. */
function occurrences(haystack: string, needle: string): number[] {
  const out: number[] = [];
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) out.push(i);
  return out;
}

const lineOf = (text: string, offset: number): number => text.slice(0, offset).split('\n').length;

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/** Where old_text probably was meant to match: a whitespace-insensitive hit, else the most similar lines. */
function closest(
  body: string,
  oldText: string,
): { whitespaceOnly: boolean; lines: { line: number; text: string }[] } {
  const file = splitLines(body);
  const flat = file.map(squash);
  const want = splitLines(oldText).map(squash);
  while (want[0] === '') want.shift();
  while (want.at(-1) === '') want.pop();
  if (want.length === 0) return { whitespaceOnly: false, lines: [] };
  for (let i = 0; i + want.length <= flat.length; i++) {
    if (want.every((w, j) => flat[i + j] === w)) {
      return {
        whitespaceOnly: true,
        lines: file.slice(i, i + want.length).map((text, j) => ({ line: i + j + 1, text })),
      };
    }
  }
  const target = want[0] as string;
  const scored = flat
    .map((l, i) => ({ line: i + 1, text: file[i] as string, score: similarity(l, target) }))
    .filter((s) => s.score > 0.3)
    .sort((a, b) => b.score - a.score || a.line - b.line)
    .slice(0, 3);
  return {
    whitespaceOnly: false,
    lines: scored.map(({ line, text }) => ({ line, text: text.slice(0, 200) })),
  };
}

/** Dice coefficient over character bigrams: cheap and good enough to point at a near-miss. */
function similarity(a: string, b: string): number {
  if (a === b) return 1;
  if (a.length < 2 || b.length < 2) return 0;
  const grams = new Map<string, number>();
  for (let i = 0; i < a.length - 1; i++)
    grams.set(a.slice(i, i + 2), (grams.get(a.slice(i, i + 2)) ?? 0) + 1);
  let common = 0;
  for (let i = 0; i < b.length - 1; i++) {
    const g = b.slice(i, i + 2);
    const n = grams.get(g) ?? 0;
    if (n > 0) {
      common++;
      grams.set(g, n - 1);
    }
  }
  return (2 * common) / (a.length - 1 + (b.length - 1));
}
