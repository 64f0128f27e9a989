/**
 * The hidden marker each write the app makes on GitHub carries (comments, replies, pull request
 * descriptions): an HTML comment naming the run (or delivery) and the kind of write, so a POST that
 * timed out but landed is found and reused instead of being made twice. Markdown renders nothing for
 * it. A marker proves nothing by itself: anyone can type one, so only the app's own writes count
 * (publish/landed.ts checks the author), and markers are taken out of every text the model reads.
 */

export interface Marker {
  /** The run, or the webhook delivery a reply answers. */
  run: string;
  /** What the write is: `status`, `evidence`, `reply-<comment id>`, … (one per run and place). */
  kind: string;
}

/** Characters a marker's fields keep: nothing that could close the HTML comment or break parsing. */
const field = (s: string): string => s.replace(/[^\w.:-]/g, '_');

const MARKER = /\n*<!-- agenticfix:run=([\w.:-]+);kind=([\w.:-]+) -->\s*$/;
/** Any text that could pass for a marker, loosely spelled: what is removed before the model reads. */
const LOOSE = /<!--\s*agenticfix:[\s\S]*?-->/gi;

export function markerText(m: Marker): string {
  return `<!-- agenticfix:run=${field(m.run)};kind=${field(m.kind)} -->`;
}

/**
 * The marker ending `body` (the last line, where edits and appended sections leave it be), or null. A
 * body cut to fit GitHub's limit is cut before it (publish/github.ts `withBody`).
 */
export function readMarker(body: string | null | undefined): Marker | null {
  const m = MARKER.exec(body ?? '');
  return m ? { run: m[1]!, kind: m[2]! } : null;
}

/** `body` without its marker. */
export const unmarked = (body: string): string => body.replace(MARKER, '');

/** `body` ended by the marker (one already there is replaced). */
export const withMarker = (body: string, m: Marker): string => `${unmarked(body)}\n\n${markerText(m)}`;

/** `text` without anything that looks like the app's markers (untrusted text on its way to the model). */
export const stripMarkers = (text: string): string => text.replace(LOOSE, '');
