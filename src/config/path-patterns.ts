/**
 * Repository path patterns (`protected_paths`, `ci_entry_points`): the one parser and the one matcher,
 * used by the agent's tools and at publish alike. An entry names a file or directory relative to the
 * repository root and may use `*` (any characters but `/`), `?` (one character but `/`) and `**` (any
 * number of directories, as a whole segment). `./` in front and `/` at the end are dropped. A pattern
 * that matches a directory covers everything under it. Anything the matcher could not enforce as
 * written is refused with a message naming the entry, never silently read another way.
 */

export type PatternResult = { ok: true; pattern: string } | { ok: false; error: string };

/** Normalises and checks one entry. */
export function parsePathPattern(entry: string): PatternResult {
  const bad = (why: string): PatternResult => ({ ok: false, error: `\`${entry}\` ${why}` });
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(entry)) return bad('contains control characters');
  if (entry.trim() !== entry) return bad('has leading or trailing spaces');
  if (entry.startsWith('/')) return bad('is absolute: paths are relative to the repository root');
  if (entry.includes('\\'))
    return bad('contains `\\`: use `/` between directories; escapes are not supported');
  if (entry.startsWith('!')) return bad('is a negation (`!`), which is not supported');
  const unsupported = /[[\]{}]/.exec(entry);
  if (unsupported) return bad(`uses \`${unsupported[0]}\`: only \`*\`, \`?\` and \`**\` are supported`);
  const segments = entry
    .replace(/^(?:\.\/+)+/, '')
    .split('/')
    .filter((s) => s !== '')
    .filter((s, i, all) => !(s === '**' && all[i - 1] === '**')); // `**/**` is `**`
  if (segments.includes('..')) return bad('contains `..`: it must stay inside the repository');
  if (segments.every((s) => s === '**' || s === '.')) return bad('covers the whole repository');
  if (segments.includes('.')) return bad('contains a `.` directory');
  const starry = segments.find((s) => s.includes('**') && s !== '**');
  if (starry) return bad(`uses \`**\` inside \`${starry}\`: \`**\` must be a whole path segment`);
  return { ok: true, pattern: segments.join('/') };
}

/**
 * Whether `pattern` covers `file` (it or a directory above it), segment by segment: the set of path
 * segments each prefix of the pattern can end at, so `**` costs a pass over the path, never a search.
 * A regular expression was built here before: a repository's `a*a*a*a*a*a*a*a*b` against a long name
 * backtracked for minutes to hours, holding the event loop (every run, every delivery) that long, and
 * its `.` stopped at a newline, so `migrations/x<LF>y.sql` was not under `migrations`.
 */
function covers(pattern: string, file: string): boolean {
  const parsed = parsePathPattern(pattern);
  // Callers validate entries when they read the configuration; an unchecked one is a programming error.
  if (!parsed.ok) throw new Error(`invalid path pattern ${parsed.error}`);
  const path = file.split('/');
  // ends[j]: the pattern so far matches the first j segments of the path.
  let ends = new Array<boolean>(path.length + 1).fill(false);
  ends[0] = true;
  for (const seg of parsed.pattern.split('/')) {
    const next = ends.map(() => false);
    if (seg === '**') {
      // Any number of segments from the first place reached on.
      const first = ends.indexOf(true);
      if (first !== -1) next.fill(true, first);
    } else
      for (let j = 0; j < path.length; j++) if (ends[j] && segmentMatches(seg, path[j]!)) next[j + 1] = true;
    ends = next;
  }
  // A pattern that matches a directory covers everything under it.
  return ends.some(Boolean);
}

/**
 * `*` (any characters) and `?` (one) within one segment, in time proportional to the lengths' product
 * at worst: on a mismatch only the last `*` takes one more character, since any earlier `*` could
 * have taken whatever it takes.
 */
function segmentMatches(pattern: string, name: string): boolean {
  let p = 0;
  let n = 0;
  let star = -1; // the last `*` seen, and where its match would end so far
  let mark = 0;
  while (n < name.length) {
    if (pattern[p] === '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.length && (pattern[p] === '?' || pattern[p] === name[n])) {
      p++;
      n++;
    } else if (star !== -1) {
      p = star + 1;
      n = ++mark;
    } else return false;
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/** The first pattern that covers `file` (a normalised repository-relative path), if any. */
export function matchingPattern(file: string, patterns: readonly string[]): string | undefined {
  return patterns.find((p) => covers(p, file));
}
