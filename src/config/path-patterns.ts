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

function regexOf(pattern: string): RegExp {
  const parsed = parsePathPattern(pattern);
  // Callers validate entries when they read the configuration; an unchecked one is a programming error.
  if (!parsed.ok) throw new Error(`invalid path pattern ${parsed.error}`);
  const segs = parsed.pattern.split('/');
  let src = '';
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    if (seg === '**') {
      src += i === 0 ? '(?:.*/)?' : last ? '(?:/.*)?' : '(?:/.*)?/';
      return;
    }
    if (i > 0 && segs[i - 1] !== '**') src += '/';
    src += seg
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '[^/]*')
      .replace(/\?/g, '[^/]');
  });
  return new RegExp(`^${src}(?:/.*)?$`);
}

/** The first pattern that covers `file` (a normalised repository-relative path), if any. */
export function matchingPattern(file: string, patterns: readonly string[]): string | undefined {
  return patterns.find((p) => regexOf(p).test(file));
}
