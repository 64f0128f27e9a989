import type { ToolResult } from './types.js';

/**
 * The one place where tool results are cut to fit the model's context. Only the parts of `data` that
 * grow (long strings such as stdout or file content, long lists such as matches) are cut, each keeping
 * its head and tail around a marker that says how much was cut; the envelope is never cut, and the
 * result is serialized after cutting, so the model always receives valid JSON.
 */

/** Process output ends with the verdict (closing lines, the error): keep more of its tail. */
const TAIL_FIRST_KEYS = new Set(['stdout', 'stderr', 'output', 'log']);
const TAIL_FIRST_SHARE = 0.75;
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

/** Every string and list in `value` cut to about `limit` characters (serialized), recursively. */
function capValue(value: unknown, limit: number, key = ''): Cut {
  if (typeof value === 'string') {
    const out = cutText(value, limit, TAIL_FIRST_KEYS.has(key) ? TAIL_FIRST_SHARE : 0.5);
    return { value: out, cut: out !== value };
  }
  if (Array.isArray(value)) return capArray(value, limit, key);
  if (value && typeof value === 'object') {
    let cut = false;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const c = capValue(v, limit, k);
      out[k] = c.value;
      cut ||= c.cut;
    }
    return { value: out, cut };
  }
  return { value, cut: false };
}

/** A list keeps whole entries from its head and its tail, with a marker entry for the ones in between. */
function capArray(items: unknown[], limit: number, key: string): Cut {
  const capped = items.map((v) => capValue(v, limit, key));
  let cut = capped.some((c) => c.cut);
  const values = capped.map((c) => c.value);
  const sizes = values.map((v) => JSON.stringify(v).length + 1);
  if (sizes.reduce((a, b) => a + b, 0) <= limit + MIN_SAVING) return { value: values, cut };
  let head = 0;
  let used = 0;
  while (head < values.length && used + sizes[head]! <= limit / 2) used += sizes[head++]!;
  let tail = values.length;
  while (tail > head && used + sizes[tail - 1]! <= limit) used += sizes[--tail]!;
  const dropped = tail - head;
  if (dropped === 0) return { value: values, cut };
  cut = true;
  return {
    value: [
      ...values.slice(0, head),
      `[... ${dropped} of ${values.length} entries cut ...]`,
      ...values.slice(tail),
    ],
    cut,
  };
}

/** The largest leaf (string length or serialized list length) in `value`: the upper bound of the search. */
function largestLeaf(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (Array.isArray(value)) return Math.max(JSON.stringify(value).length, ...value.map(largestLeaf));
  if (value && typeof value === 'object') return Math.max(0, ...Object.values(value).map(largestLeaf));
  return 0;
}

/**
 * The observation text of one result, at most `maxChars` long whenever the envelope and the small
 * fields fit: one per-field limit is found by bisection, so small fields stay whole and the large
 * ones share what is left. `truncated` is true when the tool or this cut anything.
 */
export function renderObservation(result: ToolResult, maxChars: number): string {
  const whole = JSON.stringify(result);
  if (whole.length <= maxChars) return whole;
  const render = (limit: number) => {
    const c = capValue(result.data, limit);
    return JSON.stringify({ ...result, data: c.value, truncated: result.truncated || c.cut });
  };
  let lo = 0;
  let hi = largestLeaf(result.data);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (render(mid).length <= maxChars) lo = mid;
    else hi = mid - 1;
  }
  return render(lo);
}
