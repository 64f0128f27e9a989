/** Kept from each end of an error message wherever one is stored (result.json, the run store, comments). */
export const ERROR_KEEP = 2048;

/**
 * Head and tail of `s` (where errors say what failed and why), with the number of characters left out
 * between them: the one cap for stored error strings.
 */
export function capMiddle(s: string, keep = ERROR_KEEP): string {
  if (s.length <= 2 * keep) return s;
  return `${s.slice(0, keep)}\n[... ${s.length - 2 * keep} characters left out ...]\n${s.slice(-keep)}`;
}

/** Every string in `value` (deeply) capped to its head and tail of `keep` characters each. */
export function capStrings(value: unknown, keep: number): unknown {
  if (typeof value === 'string') return capMiddle(value, keep);
  if (Array.isArray(value)) return value.map((v) => capStrings(v, keep));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, capStrings(v, keep)]));
  return value;
}
