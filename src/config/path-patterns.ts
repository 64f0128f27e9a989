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

/** A glob's part: a character, `?`, `*`, `**`, `**` with the `/` after it (`dirs`), or a `[…]` set. */
type Part = { lit: string } | { wild: '?' | '*' | '**' | 'dirs' } | { set: string; negated: boolean };

function parts(glob: string): Part[] {
  const out: Part[] = [];
  for (let i = 0; i < glob.length;) {
    const [part, length] = partAt(glob, i);
    out.push(part);
    i += length;
  }
  return out;
}

/** The part at `i` of `glob`, and how many characters it takes. */
function partAt(glob: string, i: number): [Part, number] {
  const c = glob[i]!;
  if (glob.startsWith('**/', i)) return [{ wild: 'dirs' }, 3];
  if (glob.startsWith('**', i)) return [{ wild: '**' }, 2];
  if (c === '*' || c === '?') return [{ wild: c }, 1];
  if (c === '\\' && i + 1 < glob.length) return [{ lit: glob[i + 1]! }, 2];
  // A set ends at the first `]` after its first character; without one, `[` is itself.
  const end = c === '[' ? glob.indexOf(']', i + 2) : -1;
  if (end === -1) return [{ lit: c }, 1];
  const negated = glob[i + 1] === '!' || glob[i + 1] === '^';
  return [{ set: glob.slice(i + (negated ? 2 : 1), end), negated }, end + 1 - i];
}

/** Whether one character `c` (never `/`) is in `set` (`a-z` ranges and single characters). */
function inSet(set: string, c: string): boolean {
  for (let i = 0; i < set.length; i++)
    if (set[i + 1] === '-' && i + 2 < set.length) {
      if (set[i]! <= c && c <= set[i + 2]!) return true;
      i += 2;
    } else if (set[i] === c) return true;
  return false;
}

/** Whether part `p` reads one character `c`, and stays (true: `*`, `**`) or moves on. */
function reads(p: Part, c: string): 'stay' | 'next' | null {
  if ('lit' in p) return p.lit === c ? 'next' : null;
  if ('set' in p) return c !== '/' && inSet(p.set, c) !== p.negated ? 'next' : null;
  if (p.wild === '**') return 'stay';
  if (c === '/') return null;
  return p.wild === '?' ? 'next' : 'stay';
}

/**
 * Whether all of `text` matches `glob`: `*` any characters but `/`, `?` one but `/`, `[a-z]` (`[!…]`)
 * one of (not of) a set but `/`, `**` any characters, and followed by `/` any number of directories
 * (none too); `\\` makes the next character itself, as every other character is (a newline too). The
 * set of places in the glob that the text read so far can reach is carried along, so the time is the
 * lengths' product at worst, never a backtracking search (a regular expression of `a*a*a*a*a*a*a*a*b`
 * took minutes on a name of 60 `a`s).
 */
export function globMatches(glob: string, text: string): boolean {
  const ps = parts(glob);
  // at[i]: before part i; inDir[i]: inside a directory name that part i (dirs) is reading.
  let at = new Uint8Array(ps.length + 1);
  let inDir = new Uint8Array(ps.length);
  const skip = (a: Uint8Array) => {
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i]!;
      if (a[i] && 'wild' in p && p.wild !== '?') a[i + 1] = 1;
    }
  };
  at[0] = 1;
  skip(at);
  for (let k = 0; k < text.length; k++) {
    const c = text[k]!;
    const nextAt = new Uint8Array(ps.length + 1);
    const nextIn = new Uint8Array(ps.length);
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i]!;
      const dirs = 'wild' in p && p.wild === 'dirs';
      if (inDir[i] || (at[i] && dirs)) (c === '/' ? nextAt : nextIn)[i] = 1;
      if (!at[i] || dirs) continue;
      const step = reads(p, c);
      if (step) nextAt[step === 'stay' ? i : i + 1] = 1;
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
