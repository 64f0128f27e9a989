import path from 'node:path';
import { globMatches } from '../config/path-patterns.js';
import { readRegularFile } from '../workspace/safe-read.js';

/** A .gitignore larger than this is not read (the repository is untrusted). */
const MAX_GITIGNORE_BYTES = 256 * 1024;

/** One line of a .gitignore, as git reads it (gitignore(5)). */
interface Rule {
  glob: string;
  /** `!`: what it matches is not ignored after all. */
  negated: boolean;
  /** A trailing `/`: directories only. */
  dirOnly: boolean;
  /** A `/` before its end: a path from the .gitignore's directory, else a name at any depth. */
  anchored: boolean;
}

/**
 * The rules of a .gitignore. Matched by globMatches, never as regular expressions: the `ignore` package
 * made each line one, and a repository's `a*a*a*a*b` line against a file name of 255 `a`s held the
 * event loop 150 s per file a listing or search passed (hours at more `*`).
 */
export function gitignoreRules(text: string): Rule[] {
  const rules: Rule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    // Trailing spaces are dropped unless the last is escaped with a backslash.
    let line = withoutTrailing(raw, ' ');
    if (line.length < raw.length && line.endsWith('\\')) line = raw.slice(0, line.length + 1);
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    if (negated) line = line.slice(1);
    const dirOnly = line.endsWith('/');
    line = withoutTrailing(line, '/');
    if (line === '') continue;
    const anchored = line.includes('/');
    rules.push({ glob: line.replace(/^\//, ''), negated, dirOnly, anchored });
  }
  return rules;
}

/**
 * `s` without the run of `c` at its end. Scanned, not a regular expression: `/ +$/` tries every start
 * of a run that does not reach the end, so a line of 100,000 spaces and an `x` took seconds.
 */
function withoutTrailing(s: string, c: string): string {
  let end = s.length;
  while (end > 0 && s[end - 1] === c) end--;
  return s.slice(0, end);
}

/** Whether `rules` ignore `rel` (from their .gitignore's directory): the last rule that matches decides. */
function ignoredBy(rules: readonly Rule[], rel: string, isDir: boolean): boolean {
  for (let i = rules.length - 1; i >= 0; i--) {
    const r = rules[i]!;
    if (r.dirOnly && !isDir) continue;
    if (globMatches(r.glob, r.anchored ? rel : path.posix.basename(rel))) return !r.negated;
  }
  return false;
}

/**
 * What the repository's .gitignore files (at the root and in every directory) ignore, as git reads
 * them: coverage reports, build output and the like, which search_code and list_files skip unless asked.
 * A directory they ignore is not entered (the walk's), so nothing below it is asked about.
 */
export class GitIgnores {
  private readonly rules = new Map<string, Rule[] | null>();
  constructor(private readonly root: string) {}

  private rulesOf(dirRel: string): Rule[] | null {
    const known = this.rules.get(dirRel);
    if (known !== undefined) return known;
    const read = readRegularFile(path.join(this.root, dirRel, '.gitignore'), MAX_GITIGNORE_BYTES);
    const rules = read.ok ? gitignoreRules(read.buf.toString('utf8')) : null;
    this.rules.set(dirRel, rules);
    return rules;
  }

  /** Whether `rel` (relative to the root, `/`-separated) is ignored by a .gitignore above it. */
  ignored(rel: string, isDir: boolean): boolean {
    const parts = rel.split('/');
    for (let i = 0; i < parts.length; i++) {
      const rules = this.rulesOf(parts.slice(0, i).join('/'));
      if (rules && ignoredBy(rules, parts.slice(i).join('/'), isDir)) return true;
    }
    return false;
  }
}
