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
