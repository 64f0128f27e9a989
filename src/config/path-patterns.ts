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
 * Whether `pattern` covers `file` (it, or a directory above it: a trailing `/**` adds nothing).
 * A regular expression was built here before: a repository's `a*a*a*a*a*a*a*a*b` against a long name
 * backtracked for minutes to hours, holding the event loop (every run, every delivery) that long, and
 * its `.` stopped at a newline, so `migrations/x<LF>y.sql` was not under `migrations`.
 */
function covers(pattern: string, file: string): boolean {
  const parsed = parsePathPattern(pattern);
  // Callers validate entries when they read the configuration; an unchecked one is a programming error.
  if (!parsed.ok) throw new Error(`invalid path pattern ${parsed.error}`);
  const dir = parsed.pattern.replace(/\/\*\*$/, '');
  return globMatches(dir, file) || globMatches(`${dir}/**`, file);
}

/** A glob's parts: `?`, `*`, `**`, `**` with the `/` after it (any directories), or one character. */
function parts(glob: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < glob.length;) {
    const part = glob.startsWith('**/', i) ? '**/' : glob.startsWith('**', i) ? '**' : glob[i]!;
    out.push(part);
    i += part.length;
  }
  return out;
}

/**
 * Whether all of `text` matches `glob`: `*` any characters but `/`, `?` one but `/`, `**` any
 * characters, and followed by `/` any number of directories (none too); every other character is
 * itself, a newline too. The set of places in the glob that the text read so far can reach is carried
 * along, so the time is the lengths' product at worst, never a backtracking search (a regular expression of
 * `*a*a*a*a*a*a*a*a*b` took minutes on a name of 60 `a`s).
 */
export function globMatches(glob: string, text: string): boolean {
  const ps = parts(glob);
  // at[i]: before part i; inDir[i]: inside a directory name that part i (directories) is reading.
  let at = new Uint8Array(ps.length + 1);
  let inDir = new Uint8Array(ps.length);
  const skip = (a: Uint8Array) => {
    for (let i = 0; i < ps.length; i++)
      if (a[i] && (ps[i] === '*' || ps[i] === '**' || ps[i] === '**/')) a[i + 1] = 1;
  };
  at[0] = 1;
  skip(at);
  for (let k = 0; k < text.length; k++) {
    const c = text[k]!;
    const nextAt = new Uint8Array(ps.length + 1);
    const nextIn = new Uint8Array(ps.length);
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i]!;
      if (inDir[i]) (c === '/' ? nextAt : nextIn)[i] = 1;
      if (!at[i]) continue;
      if (p === '**/') (c === '/' ? nextAt : nextIn)[i] = 1;
      else if (p === '**' || (p === '*' && c !== '/')) nextAt[i] = 1;
      else if ((p === '?' && c !== '/') || p === c) nextAt[i + 1] = 1;
    }
    skip(nextAt);
    [at, inDir] = [nextAt, nextIn];
  }
  return at[ps.length] === 1;
}

/** The first pattern that covers `file` (a normalised repository-relative path), if any. */
export function matchingPattern(file: string, patterns: readonly string[]): string | undefined {
  return patterns.find((p) => covers(p, file));
}
