import path from 'node:path';
import { globMatches } from '../config/path-patterns.js';
import { patchFiles } from '../patch/patch.js';

/** One `diff --git` section of a patch. */
export interface FilePatch {
  /** Path after the change (the old path for a deletion). */
  path: string;
  oldPath: string;
  status: 'added' | 'deleted' | 'modified' | 'renamed';
  binary: boolean;
  /** The section's text, ready to be re-joined with others and applied. */
  text: string;
  /** Content lines of every hunk: added ('+'), removed ('-') and context (' '), with new-side line numbers. */
  lines: PatchLine[];
}

export interface PatchLine {
  kind: '+' | '-' | ' ';
  text: string;
  /** Line number on the new side (for '-' lines: where the removal happened). */
  line: number;
  /** Index of the hunk the line belongs to (context never spans hunks). */
  hunk: number;
}

/** Splits a git patch into its file sections, keeping each section's exact text. */
export function splitPatch(patch: string): FilePatch[] {
  const chunks: string[] = [];
  for (const line of patch.split(/(?<=\n)/)) {
    if (line.startsWith('diff --git ') || chunks.length === 0) chunks.push(line);
    else chunks[chunks.length - 1] += line;
  }
  return chunks.filter((c) => c.startsWith('diff --git ')).map(parseSection);
}

function parseSection(text: string): FilePatch {
  const names = patchFiles(text);
  const firstHunk = text.search(/^@@/m);
  const header = firstHunk < 0 ? text : text.slice(0, firstHunk);
  const status = /^new file mode/m.test(header)
    ? 'added'
    : /^deleted file mode/m.test(header)
      ? 'deleted'
      : /^rename from/m.test(header)
        ? 'renamed'
        : 'modified';
  const lines: PatchLine[] = [];
  let newLine = 0;
  let hunk = -1;
  let inHunk = false;
  for (const raw of text.split('\n')) {
    const h = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(raw);
    if (h) {
      newLine = Number(h[1]);
      hunk++;
      inHunk = true;
      continue;
    }
    if (!inHunk) continue;
    const kind = raw[0];
    if (kind === '+' || kind === ' ') lines.push({ kind, text: raw.slice(1), line: newLine++, hunk });
    else if (kind === '-') lines.push({ kind, text: raw.slice(1), line: newLine, hunk });
    else if (kind !== '\\') inHunk = false;
  }
  return {
    path: names[names.length - 1] ?? '',
    oldPath: names[0] ?? '',
    status,
    binary: /^(GIT binary patch|Binary files )/m.test(text),
    text,
    lines,
  };
}

/** Re-joins sections into one applicable patch. */
export const joinPatch = (sections: readonly FilePatch[]): string => sections.map((s) => s.text).join('');

const TEST_DIRS = new Set(['test', 'tests', '__tests__', 'spec', 'testdata']);
const TEST_FILE = [
  /^test_.*\.py$/, // pytest
  /_test\.py$/,
  /^conftest\.py$/,
  /\.(test|spec)\.[cm]?[jt]sx?$/, // jest, node:test, mocha, vitest
  /_test\.go$/,
];

/** Whether `p` matches a gitignore-like glob (globMatches): one without '/' matches a base name at any depth. */
export function globTest(glob: string, p: string): boolean {
  const g = glob.replace(/^\//, '');
  return globMatches(glob.includes('/') ? g : `**/${g}`, p);
}

/**
 * Whether a repository path holds tests. Rules: any file under a directory named test, tests,
 * __tests__, spec or testdata; Python test_*.py, *_test.py, conftest.py; JS/TS *.test.* and
 * *.spec.*; Go *_test.go; plus the repository's own globs (`extraGlobs`).
 */
export function isTestPath(p: string, extraGlobs: readonly string[] = []): boolean {
  const parts = p.split('/');
  if (parts.slice(0, -1).some((d) => TEST_DIRS.has(d))) return true;
  const name = path.posix.basename(p);
  if (TEST_FILE.some((re) => re.test(name))) return true;
  return extraGlobs.some((g) => globTest(g, p));
}

export interface SplitPatch {
  tests: FilePatch[];
  sources: FilePatch[];
}

/** Test and source sections of a patch (a rename counts as a test change if either side is a test path). */
export function classifyPatch(patch: string, extraGlobs: readonly string[] = []): SplitPatch {
  const tests: FilePatch[] = [];
  const sources: FilePatch[] = [];
  for (const s of splitPatch(patch)) {
    const isTest = isTestPath(s.path, extraGlobs) || isTestPath(s.oldPath, extraGlobs);
    (isTest ? tests : sources).push(s);
  }
  return { tests, sources };
}
