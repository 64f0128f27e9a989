import { LABEL, RANK, splitOutput, type Part } from './output.js';

/**
 * Fitting a runner's output (cut into parts by output.ts) to a size: the parts the model can do
 * without are cut first, each around a marker that says how many lines of what were cut.
 */

const size = (p: { lines: string[] }) => p.lines.reduce((n, l) => n + l.length + 1, 0);

/** A cut that would save less than this is not worth its marker. */
const MIN_SAVING = 64;
/** About the length of a marker line. */
const MARKER_CHARS = 40;
/** Failures and the closing summary keep at least this much (when they have it) whatever the limit. */
const RANK0_FLOOR = 1500;

/**
 * A part cut to `keep` characters: head and tail (whole lines) around a marker saying what was cut,
 * or only the marker when too little would be left to be worth showing.
 */
function cutPart(part: Part, keep: number, tailShare: number): string[] {
  const total = size(part);
  if (total <= keep + MIN_SAVING) return part.lines;
  const label = LABEL[part.kind];
  if (keep < 2 * MIN_SAVING) return [marker(part.lines.length, label)];
  keep -= MARKER_CHARS;
  let headChars = Math.floor(keep * (1 - tailShare));
  let tailChars = keep - headChars;
  const head: string[] = [];
  for (const l of part.lines) {
    if (l.length + 1 > headChars) break;
    head.push(l);
    headChars -= l.length + 1;
  }
  const tail: string[] = [];
  for (let i = part.lines.length - 1; i >= head.length; i--) {
    const l = part.lines[i]!;
    if (l.length + 1 > tailChars) break;
    tail.unshift(l);
    tailChars -= l.length + 1;
  }
  const cut = part.lines.length - head.length - tail.length;
  // One line longer than the whole share (a long assertion): keep its own head and tail.
  if (head.length === 0 && tail.length === 0) {
    const text = part.lines.join('\n');
    const h = Math.floor(keep * (1 - tailShare));
    return [
      `${text.slice(0, h)}[... ${text.length - keep} of ${text.length} characters cut ...]${text.slice(text.length - (keep - h))}`,
    ];
  }
  return [...head, marker(cut, label), ...tail];
}

const marker = (lines: number, label: string) => `[... ${lines} lines of ${label} cut ...]`;
const MARKER = /^\[\.\.\. (\d+) lines of (.+) cut \.\.\.\]$/;

/** Neighbouring parts cut to nothing but their markers read as one: `[... 1503 lines of captured output, warnings cut ...]`. */
function mergeMarkers(parts: string[][]): string[] {
  const out: string[] = [];
  let run: { lines: number; labels: string[] } | null = null;
  const flush = () => {
    if (run) out.push(marker(run.lines, [...new Set(run.labels)].join(', ')));
    run = null;
  };
  for (const p of parts) {
    const m = p.length === 1 ? MARKER.exec(p[0]!) : null;
    if (!m) {
      flush();
      out.push(...p);
      continue;
    }
    run ??= { lines: 0, labels: [] };
    run.lines += Number(m[1]);
    run.labels.push(m[2]!);
  }
  flush();
  return out;
}

/**
 * The parts' text in at most about `limit` characters. Parts are cut from the highest rank down
 * (captured output and pass lines first, then warnings and repeats, then other output); failures and
 * the closing summary only when nothing else is left to cut. `tailShare`: how much of a cut part's
 * kept text comes from its end (process output ends with the verdict).
 */
export function fitParts(
  parts: readonly Part[],
  limit: number,
  tailShare = 0.5,
): { text: string; cut: boolean } {
  const full = parts.map((p) => p.lines);
  const total = (xs: string[][]) => xs.reduce((n, ls) => n + size({ lines: ls }), 0) - 1;
  if (total(full) <= limit) return { text: full.map((l) => l.join('\n')).join('\n'), cut: false };
  const out = [...full];
  for (let rank = 3; rank >= 0; rank--) {
    const at = parts.flatMap((p, i) => (RANK[p.kind] === rank ? [i] : []));
    if (at.length === 0) continue;
    const others = total(out.filter((_, i) => !at.includes(i)));
    const wanted = at.reduce((n, i) => n + size(parts[i]!), 0);
    let budget = Math.max(0, limit - others);
    if (rank === 0) budget = Math.max(budget, Math.min(wanted, RANK0_FLOOR));
    if (wanted <= budget) continue;
    for (const i of at)
      out[i] = cutPart(parts[i]!, Math.floor((budget * size(parts[i]!)) / wanted), tailShare);
    if (total(out) <= limit) break;
  }
  return { text: mergeMarkers(out).join('\n'), cut: true };
}

/** Output text cut by meaning to about `limit` characters (see fitParts). */
export const fitOutput = (text: string, limit: number, tailShare = 0.5): { text: string; cut: boolean } =>
  fitParts(splitOutput(text), limit, tailShare);
