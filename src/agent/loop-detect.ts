import { sha256 } from '../trace/trace.js';

/** JSON with sorted keys, so the same arguments always hash the same. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * Timings differ between otherwise identical runs (a test run's duration, and the time limit derived
 * from the first full run); they must not hide a loop.
 */
function normalizeObservation(text: string): string {
  return text
    .replace(/((?:duration_ms|time_limit_s)["']?\s*[:=]?\s*)[\d.]+/gi, '$1#')
    .replace(/\b\d+(\.\d+)?\s?(ms|s|sec|seconds)\b/g, '#$2');
}

/**
 * Notices a run going in circles: the same action getting the same observation `repeat` times in a row,
 * or two such steps alternating (A B A B …) for `repeat` rounds. A different observation breaks the
 * pattern, because then the action did make a difference.
 */
export class LoopDetector {
  private readonly keys: string[] = [];

  constructor(private readonly repeat: number) {}

  record(tool: string, args: unknown, observation: string): boolean {
    this.keys.push(`${sha256(tool + canonicalJson(args))}:${sha256(normalizeObservation(observation))}`);
    return this.sameInARow() || this.alternating();
  }

  private sameInARow(): boolean {
    const tail = this.keys.slice(-this.repeat);
    return tail.length === this.repeat && tail.every((k) => k === tail[0]);
  }

  private alternating(): boolean {
    const tail = this.keys.slice(-2 * this.repeat);
    if (tail.length < 2 * this.repeat || tail[0] === tail[1]) return false;
    return tail.every((k, i) => k === tail[i % 2]);
  }
}
