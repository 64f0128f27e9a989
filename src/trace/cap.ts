/** The most characters of an error message kept wherever one is stored (result.json, the run store, comments). */
export const ERROR_MAX_CHARS = 4000;

/**
 * Keeps the head and the tail of `text` (where errors say what failed and why) within `max`
 * characters, with a marker saying how much was cut from the middle.
 */
export function capText(text: string, max = ERROR_MAX_CHARS): string {
  if (text.length <= max) return text;
  const marker = `\n[… ${text.length - max} of ${text.length} characters cut …]\n`;
  const keep = Math.max(0, max - marker.length);
  const head = Math.ceil(keep / 2);
  return text.slice(0, head) + marker + text.slice(text.length - (keep - head));
}
