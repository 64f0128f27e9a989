import type { ToolResult } from '../tools/types.js';

/**
 * Lines of one file version as a read showed them, kept by the context policy so that it can show
 * some of them again without the model spending a turn on a read: a stub keeps the file's head, and
 * a search whose matches fall in a compacted read shows the lines around them.
 */
export interface ShownLines {
  path: string;
  version: string;
  start: number;
  /** As shown: numbered (`    6| text`). */
  lines: string[];
}

/** Some of those lines, as an observation shows them (the fields a read's result has). */
export interface Excerpt {
  path: string;
  version: string;
  start_line: number;
  end_line: number;
  content: string;
}

/** What a successful read_file result showed; null for anything else. */
export function shownLines(tool: string, result: ToolResult): ShownLines | null {
  const d = result.data as Record<string, unknown> | null;
  if (tool !== 'read_file' || !result.success || !d) return null;
  const { path, version, start_line: start, content } = d;
  if (typeof path !== 'string' || typeof version !== 'string' || typeof start !== 'number') return null;
  if (typeof content !== 'string' || content === '') return null;
  return { path, version, start, lines: content.split('\n') };
}

const endOf = (s: ShownLines): number => s.start + s.lines.length - 1;

/** Lines `from`..`to` of `s` (clamped to what it showed); null when none of them are in it. */
export function excerpt(s: ShownLines, from: number, to: number): Excerpt | null {
  const a = Math.max(from, s.start);
  const b = Math.min(to, endOf(s));
  if (a > b) return null;
  const content = s.lines.slice(a - s.start, b - s.start + 1).join('\n');
  return { path: s.path, version: s.version, start_line: a, end_line: b, content };
}

export const covers = (s: Pick<ShownLines, 'start' | 'lines'>, line: number): boolean =>
  line >= s.start && line <= endOf(s as ShownLines);

/** The file and line of each match of a successful search_code result. */
export function searchHits(tool: string, result: ToolResult): { file: string; line: number }[] {
  const d = result.data as { results?: unknown } | null;
  if (tool !== 'search_code' || !result.success || !Array.isArray(d?.results)) return [];
  return (d.results as Record<string, unknown>[]).flatMap((r) =>
    typeof r.file === 'string' && typeof r.line === 'number' ? [{ file: r.file, line: r.line }] : [],
  );
}

/**
 * The windows of `around` lines either side of each hit that lies in one of `lost` (reads the model
 * sees only as stubs, file unchanged since) and in none of `seen` (lines it sees whole), merged where
 * they touch, in hit order, up to `maxLines` lines in all.
 */
export function linesAround(
  hits: { file: string; line: number }[],
  lost: ShownLines[],
  seen: ShownLines[],
  around: number,
  maxLines: number,
): Excerpt[] {
  const out: Excerpt[] = [];
  let used = 0;
  for (const h of hits) {
    const same = (s: ShownLines) => s.path === h.file && covers(s, h.line);
    const from = lost.findLast(same);
    if (!from || seen.some(same) || out.some((e) => e.path === h.file && covers(asShown(e), h.line)))
      continue;
    const e = excerpt(from, h.line - around, h.line + around);
    if (!e) continue;
    const prev = out.findLast(
      (x) => x.path === e.path && x.version === e.version && x.end_line + 1 >= e.start_line,
    );
    const merged = prev && from.start <= prev.start_line ? excerpt(from, prev.start_line, e.end_line) : null;
    const next = merged ?? e;
    const lines = next.end_line - next.start_line + 1 - (merged ? prev!.end_line - prev!.start_line + 1 : 0);
    if (used + lines > maxLines) break;
    used += lines;
    if (merged) out[out.indexOf(prev!)] = merged;
    else out.push(e);
  }
  return out;
}

/** An excerpt as lines shown (to ask whether it covers a line). */
export const asShown = (e: Excerpt): ShownLines => ({
  path: e.path,
  version: e.version,
  start: e.start_line,
  lines: e.content.split('\n'),
});
