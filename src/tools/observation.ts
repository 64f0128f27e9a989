import { fitOutput } from '../testrunners/output-fit.js';
import type { ToolResult } from './types.js';

/**
 * The one place where tool results are cut to fit the model's context. Only the parts of `data` that
 * grow (long strings such as stdout or file content, long lists such as matches) are cut, each keeping
 * its head and tail around a marker that says how much was cut; the envelope is never cut, and the
 * result is serialized after cutting, so the model always receives valid JSON. Process output is cut
 * by meaning (src/environment/output.ts): captured output of passing tests, pass lines and warnings
 * go before the failures and the closing summary. A test run's `failures` are cut last, whole entries.
 */

/** Process output ends with the verdict (closing lines, the error): keep more of its tail. */
const OUTPUT_KEYS = new Set(['stdout', 'stderr', 'output']);
const TAIL_FIRST_SHARE = 0.75;
/** Cut only when everything else is as short as it gets, and then by whole entries from the end. */
const FIRST_KEYS = new Set(['failures']);
/** A cut that would save less than this is not worth its marker. */
const MIN_SAVING = 64;
/** A head or tail is snapped to a line boundary when one lies within this share of it. */
const LINE_SNAP = 0.2;

/** `head` + marker + `tail` of a string, `keep` characters kept in all (snapped to whole lines where cheap). */
export function cutText(text: string, keep: number, tailShare = 0.5): string {
  if (text.length <= keep + MIN_SAVING) return text;
  let headEnd = Math.floor(keep * (1 - tailShare));
  let tailStart = text.length - (keep - headEnd);
  const nl = text.lastIndexOf('\n', headEnd);
  if (nl >= 0 && headEnd - nl <= headEnd * LINE_SNAP) headEnd = nl + 1;
  const nl2 = text.indexOf('\n', tailStart);
  if (nl2 >= 0 && nl2 - tailStart <= (text.length - tailStart) * LINE_SNAP) tailStart = nl2 + 1;
  const tail = text.slice(tailStart);
  const marker = `[... ${tailStart - headEnd} of ${text.length} characters cut ...]`;
  return `${text.slice(0, headEnd)}${marker}${tail && `\n${tail}`}`;
}

interface Cut {
  value: unknown;
  cut: boolean;
}

interface Limits {
  /** For every growing field but FIRST_KEYS. */
  rest: number;
  first: number;
}

/** Every string and list in `value` cut to about `limit` characters (serialized), recursively. */
function capValue(value: unknown, limits: Limits, key = ''): Cut {
  const limit = limits.rest;
  if (typeof value === 'string') {
    if (OUTPUT_KEYS.has(key)) {
      const fit = fitOutput(value, limit, TAIL_FIRST_SHARE);
      return { value: fit.text, cut: fit.cut };
    }
    const out = cutText(value, limit, key === 'log' ? TAIL_FIRST_SHARE : 0.5);
    return { value: out, cut: out !== value };
  }
  if (Array.isArray(value)) {
    if (FIRST_KEYS.has(key)) return capHead(value, limits.first);
    return capArray(value, limit, key);
  }
  if (value && typeof value === 'object') {
    let cut = false;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const c = capValue(v, limits, k);
      out[k] = c.value;
      cut ||= c.cut;
    }
    return { value: out, cut };
  }
  return { value, cut: false };
}

/** Whole entries from the head and a marker for the rest; an entry is cut only when the first alone is too long. */
function capHead(items: unknown[], limit: number): Cut {
  if (JSON.stringify(items).length <= limit) return { value: items, cut: false };
  const kept: unknown[] = [];
  let used = 0;
  for (const item of items) {
    const n = JSON.stringify(item).length + 1;
    if (used + n > limit) break;
    kept.push(item);
    used += n;
  }
  if (kept.length === 0 && items.length > 0)
    kept.push(capValue(items[0], { rest: limit, first: limit }).value);
  const dropped = items.length - kept.length;
  return {
    value: dropped ? [...kept, `[... ${dropped} of ${items.length} entries cut ...]`] : kept,
    cut: true,
  };
}

/**
 * A list keeps whole entries from its head and its tail, with a marker entry for the ones in between.
 * Only the entries that can be kept are capped and measured: a list of 250,000 paths costs no more
 * than one at the limit.
 */
function capArray(items: unknown[], limit: number, key: string): Cut {
  const capOne = (v: unknown) => capValue(v, { rest: limit, first: limit }, key);
  const size = (v: unknown) => JSON.stringify(v).length + 1;
  const head: unknown[] = [];
  let cut = false;
  let total = 0;
  for (const item of items) {
    const c = capOne(item);
    cut ||= c.cut;
    head.push(c.value);
    total += size(c.value);
    if (total > limit + MIN_SAVING) break;
  }
  if (head.length === items.length && total <= limit + MIN_SAVING) return { value: head, cut };
  let kept = 0;
  let used = 0;
  while (kept < head.length && used + size(head[kept]) <= limit / 2) used += size(head[kept++]);
  const tail: unknown[] = [];
  for (let i = items.length - 1; i >= kept; i--) {
    const v = i < head.length ? head[i] : capOne(items[i]).value;
    if (used + size(v) > limit) break;
    used += size(v);
    tail.push(v);
  }
  tail.reverse();
  const dropped = items.length - kept - tail.length;
  if (dropped === 0) return { value: [...head.slice(0, kept), ...tail], cut };
  return {
    value: [...head.slice(0, kept), `[... ${dropped} of ${items.length} entries cut ...]`, ...tail],
    cut: true,
  };
}

/** The largest leaf (string length or serialized list length) in `value`: the upper bound of the search. */
function largestLeaf(value: unknown): number {
  if (typeof value === 'string') return value.length;
  // A loop, never a spread into Math.max: a list of 250,000 paths would overflow the call stack.
  const most = (values: unknown[], start: number) =>
    values.reduce<number>((m, v) => Math.max(m, largestLeaf(v)), start);
  if (Array.isArray(value)) return most(value, JSON.stringify(value).length);
  if (value && typeof value === 'object') return most(Object.values(value), 0);
  return 0;
}

/** The largest `n` in [0, hi] for which `fits(n)`, or 0. */
function bisect(hi: number, fits: (n: number) => boolean): number {
  let lo = 0;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * The observation text of one result, at most `maxChars` long whenever the envelope and the small
 * fields fit: one per-field limit is found by bisection, so small fields stay whole and the large
 * ones share what is left; FIRST_KEYS stay whole until the others are cut to their least, then get a
 * limit of their own. `truncated` is true when the tool or this cut anything.
 */
export function renderObservation(result: ToolResult, maxChars: number): string {
  const whole = JSON.stringify(result);
  if (whole.length <= maxChars) return whole;
  const render = (limits: Limits) => {
    const c = capValue(result.data, limits);
    return JSON.stringify({ ...result, data: c.value, truncated: result.truncated || c.cut });
  };
  const hi = largestLeaf(result.data);
  const fits = (limits: Limits) => render(limits).length <= maxChars;
  if (fits({ rest: 0, first: Infinity }))
    return render({ rest: bisect(hi, (n) => fits({ rest: n, first: Infinity })), first: Infinity });
  return render({ rest: 0, first: bisect(hi, (n) => fits({ rest: 0, first: n })) });
}
