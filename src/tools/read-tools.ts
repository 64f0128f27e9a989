import { z } from 'zod';
import {
  globMatcher,
  isBinary,
  isLoaded,
  loadFile,
  numberLines,
  readSameFile,
  splitLines,
  walkTree,
  type TreeEntry,
} from './files.js';
import { GitIgnores } from './gitignore.js';
import { pathError, relPath, resolveInWorktree } from './paths.js';
import { fail, ok, type ToolContext, type ToolDefinition } from './types.js';

/**
 * Room left in an observation for the envelope and the small fields around a page of lines or entries:
 * a page is made to fit the observation cap whole, so the renderer never cuts it in its middle.
 */
const PAGE_RESERVE_CHARS = 800;
const pageChars = (ctx: ToolContext) => Math.max(1000, ctx.limits.observationMaxChars - PAGE_RESERVE_CHARS);

const INCLUDE_IGNORED = z
  .boolean()
  .default(false)
  .describe('Also show what .gitignore ignores (coverage, build output…)');

/** The repository's ignore rules, unless the model asked for ignored paths too. */
const ignoresFor = (ctx: ToolContext, includeIgnored: boolean) =>
  includeIgnored ? null : new GitIgnores(ctx.worktree);

const ListArgs = z.strictObject({
  path: relPath.default('.').describe('The directory to list (relative to the repository root)'),
  max_depth: z.int().min(1).max(10).default(3).describe('How many directory levels to descend (1-10)'),
  offset: z.int().min(0).default(0).describe('Entries to skip: the next_offset of the previous page'),
  include_ignored: INCLUDE_IGNORED,
});

type ListEntry = { path: string; type: TreeEntry['type']; size?: number };

export const listFiles: ToolDefinition<typeof ListArgs> = {
  name: 'list_files',
  description:
    'List files and directories below a directory, to a depth, sorted, with their type. Skips .git, env ' +
    'files, dependency/cache directories and what .gitignore ignores (unless include_ignored). Long ' +
    'listings come in pages: pass next_offset as offset for the next.',
  args: ListArgs,
  mutates: false,
  async run(ctx, args) {
    const r = resolveInWorktree(ctx.worktree, args.path, { mustExist: true });
    if (!r.ok) return pathError(r);
    if (!r.stat?.isDirectory())
      return fail('invalid_arguments', `${r.rel} is not a directory; use read_file`);
    const entries: ListEntry[] = [];
    let cut = false;
    const { scanLimitHit } = walkTree(
      r.abs,
      r.rel,
      {
        maxDepth: args.max_depth,
        maxScanned: ctx.limits.maxScannedEntries,
        ignores: ignoresFor(ctx, args.include_ignored),
      },
      (e) => {
        if (entries.length >= ctx.limits.maxListEntries) {
          cut = true;
          return false;
        }
        entries.push(
          e.type === 'file'
            ? { path: e.rel, type: e.type, size: e.stat.size }
            : { path: e.rel, type: e.type },
        );
      },
    );
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    if (args.offset > 0 && args.offset >= entries.length)
      return fail('invalid_arguments', `offset ${args.offset} is past the end: ${entries.length} entries`);
    // Whole entries from the offset while the page fits one observation.
    const page: ListEntry[] = [];
    let used = 0;
    for (const e of entries.slice(args.offset)) {
      used += JSON.stringify(e).length + 1;
      if (page.length > 0 && used > pageChars(ctx)) break;
      page.push(e);
    }
    const next = args.offset + page.length < entries.length ? args.offset + page.length : null;
    const truncated = cut || scanLimitHit;
    return ok(
      {
        path: r.rel,
        total: entries.length,
        offset: args.offset,
        entries: page,
        next_offset: next,
        ...(truncated
          ? { hint: 'Listing stopped at the entry limit: list a subdirectory or use a smaller max_depth.' }
          : {}),
      },
      truncated,
    );
  },
};

const ReadArgs = z.strictObject({
  path: relPath,
  start_line: z.int().min(1).default(1).describe('First line to show (1-based)'),
  end_line: z.int().min(1).optional().describe('Last line to show (inclusive); default: as many as allowed'),
});

export const readFile: ToolDefinition<typeof ReadArgs> = {
  name: 'read_file',
  description:
    'Read a text file with numbered lines. Returns `version` (needed by edit_file and delete_file) and ' +
    '`total_lines`; long files are returned in windows: use start_line/end_line to page.',
  args: ReadArgs,
  mutates: false,
  async run(ctx, args) {
    const f = loadFile(ctx, args.path, true);
    if (!isLoaded(f)) return f;
    const text = f.buf.toString('utf8');
    const lines = splitLines(text);
    const total = lines.length;
    const start = args.start_line;
    if (args.end_line !== undefined && args.end_line < start) {
      return fail('invalid_arguments', `end_line (${args.end_line}) is before start_line (${start})`);
    }
    if (start > Math.max(total, 1)) {
      return fail('invalid_arguments', `start_line ${start} is past the end: ${f.rel} has ${total} lines`);
    }
    const maxEnd = start + ctx.limits.maxReadLines - 1;
    const wanted = args.end_line ?? Math.min(total, maxEnd);
    let end = Math.min(wanted, maxEnd, total);
    // The page ends where the next line would not fit one observation (as JSON, numbered): never cut inside.
    let used = 0;
    for (let i = start; i <= end; i++) {
      used += JSON.stringify(numberLines([lines[i - 1]!], i)).length - 1;
      if (i > start && used > pageChars(ctx)) {
        end = i - 1;
        break;
      }
    }
    const clipped = wanted > end || (args.end_line === undefined && total > end);
    let hint: string | undefined;
    if (clipped) {
      hint =
        end < total
          ? `Showing lines ${start}-${end} of ${total} (at most ${ctx.limits.maxReadLines} lines or one ` +
            `observation per call); call read_file with start_line=${end + 1} to continue.`
          : `The file ends at line ${total}.`;
    }
    return ok(
      {
        path: f.rel,
        version: f.version,
        total_lines: total,
        start_line: start,
        end_line: end,
        line_endings: text.includes('\r\n') ? 'crlf' : 'lf',
        content: numberLines(lines.slice(start - 1, end), start),
        clipped,
        ...(hint ? { hint } : {}),
      },
      clipped && end < total,
    );
  },
};

const SearchArgs = z.strictObject({
  query: z
    .string()
    .min(1)
    .max(500)
    .describe('Literal text to find (case-sensitive; not a regular expression)'),
  file_pattern: z
    .string()
    .min(1)
    .max(200)
    .default('*')
    .describe(
      'Glob on the file name (e.g. "*.py"), or on the relative path when it contains "/" (e.g. "src/**/*.ts")',
    ),
  max_results: z.int().min(1).max(200).default(50),
  include_ignored: INCLUDE_IGNORED,
});

const SNIPPET_CHARS = 400;
const MAX_SKIPPED_LISTED = 50;
const SEARCH_DEPTH = 64;

export const searchCode: ToolDefinition<typeof SearchArgs> = {
  name: 'search_code',
  description:
    'Search the repository for a literal string (case-sensitive, no regular expressions). Returns file, ' +
    'line number and the matching line. Skips what .gitignore ignores unless include_ignored.',
  args: SearchArgs,
  mutates: false,
  async run(ctx, args) {
    const matches = globMatcher(args.file_pattern);
    const results: { file: string; line: number; snippet: string }[] = [];
    const skipped: { file: string; reason: string }[] = [];
    let skippedCount = 0;
    const skip = (file: string, reason: string) => {
      if (++skippedCount <= MAX_SKIPPED_LISTED) skipped.push({ file, reason });
    };
    let full = false;
    const { scanLimitHit } = walkTree(
      ctx.worktree,
      '.',
      {
        maxDepth: SEARCH_DEPTH,
        maxScanned: ctx.limits.maxScannedEntries,
        ignores: ignoresFor(ctx, args.include_ignored),
      },
      (e) => {
        if (e.type !== 'file' || !matches(e.rel)) return;
        if (e.stat.size > ctx.limits.maxFileBytes) return skip(e.rel, 'too_large');
        if (e.stat.nlink > 1) return skip(e.rel, 'hard_link');
        const buf = readSameFile(e.abs, e.stat);
        if (!buf) return skip(e.rel, 'changed');
        if (!buf.includes(args.query)) return;
        if (isBinary(buf)) return skip(e.rel, 'binary');
        const lines = splitLines(buf.toString('utf8'));
        for (const [i, line] of lines.entries()) {
          const at = line.indexOf(args.query);
          if (at < 0) continue;
          if (results.length >= args.max_results) {
            full = true;
            return false;
          }
          results.push({ file: e.rel, line: i + 1, snippet: snippet(line, at) });
        }
      },
    );
    const truncated = full || scanLimitHit;
    return ok(
      {
        query: args.query,
        results,
        skipped,
        skipped_count: skippedCount,
        ...(full
          ? { hint: `Stopped at ${args.max_results} results: narrow file_pattern or the query.` }
          : {}),
        ...(scanLimitHit ? { scan_limit_hit: true } : {}),
      },
      truncated,
    );
  },
};

/** The line, or a window of it around the match when it is too long to show whole. */
function snippet(line: string, at: number): string {
  const trimmed = line.trim();
  if (trimmed.length <= SNIPPET_CHARS) return trimmed;
  const from = Math.max(0, Math.min(at - 100, line.length - SNIPPET_CHARS));
  return line.slice(from, from + SNIPPET_CHARS);
}
