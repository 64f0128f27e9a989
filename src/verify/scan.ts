import path from 'node:path';
import type { FilePatch, PatchLine } from './split.js';

export type FlagKind = 'swallowed_exception' | 'skip_marker' | 'ci_config_changed' | 'test_config_changed';

/** A suspicious construct in a patch; reported, never a verdict by itself. */
export interface ScanFlag {
  kind: FlagKind;
  path: string;
  line: number | null;
  snippet: string;
}

export const formatFlag = (f: ScanFlag): string =>
  `${f.kind}: ${f.path}${f.line === null ? '' : `:${f.line}`}${f.snippet ? ` \`${f.snippet}\`` : ''}`;

const PY_BLANKET_EXCEPT =
  /^\s*except\s*(?:\(?\s*(?:Exception|BaseException)(?:\s*,\s*[\w.]+)*\s*\)?)?\s*(?:as\s+\w+\s*)?:\s*(.*)$/;
const PY_SWALLOW_BODY = /^(?:pass|\.\.\.|continue)\s*(?:#.*)?$/;
const EMPTY_CATCH_ONE_LINE = /\bcatch\s*(?:\([^)]*\))?\s*\{\s*(?:\/\/.*|\/\*.*\*\/)?\s*\}/;
const CATCH_OPEN = /\bcatch\s*(?:\([^)]*\))?\s*\{\s*(?:\/\/.*)?$/;
const PROMISE_SWALLOW = /\.catch\(\s*(?:\(\s*\w*\s*\)|\w+)\s*=>\s*(?:\{\s*\}|undefined|null|void 0)\s*\)/;
const GO_RECOVER = /^\s*(?:defer\s+func\(\)\s*\{\s*)?recover\(\)/;
const PY_SUPPRESS = /\bsuppress\(\s*(?:Exception|BaseException)\s*\)/;

export const SKIP_MARKERS: readonly RegExp[] = [
  /@pytest\.mark\.(?:skip|skipif|xfail)\b/,
  /\bpytest\.(?:skip|xfail|importorskip)\(/,
  /@unittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b/,
  /\bself\.skipTest\(/,
  /\b(?:it|test|describe|suite|context)\.(?:skip|todo|only)\s*\(/,
  /\bx(?:it|describe|test)\s*\(/,
  /\{\s*(?:skip|todo)\s*:\s*(?:true|['"`])/, // node:test options
  /\bt\.(?:skip|todo)\(/,
  /\bt\.Skip(?:f|Now)?\(/, // go
  /--deselect\b|(?:^|\s)-k\s*['"]?not\b/,
];

const CI_PATHS = [
  /^\.github\/(?:workflows|actions)\//,
  /^\.gitlab-ci\.yml$/,
  /^\.circleci\//,
  /^\.travis\.yml$/,
  /^azure-pipelines\.ya?ml$/,
  /^Jenkinsfile$/,
  /^\.buildkite\//,
  /^bitbucket-pipelines\.yml$/,
  /^appveyor\.ya?ml$/,
  /^\.drone\.ya?ml$/,
];
const TEST_CONFIG = [
  /^pytest\.ini$/,
  /^tox\.ini$/,
  /^noxfile\.py$/,
  /^jest\.config\.[cm]?[jt]s(?:on)?$/,
  /^\.mocharc\./,
  /^vitest\.config\./,
];

/** New-side lines (context and added) of one hunk, in order. */
function newSide(lines: readonly PatchLine[], hunk: number): PatchLine[] {
  return lines.filter((l) => l.hunk === hunk && l.kind !== '-');
}

function swallowed(f: FilePatch): ScanFlag[] {
  const flags: ScanFlag[] = [];
  const flag = (l: PatchLine) =>
    flags.push({ kind: 'swallowed_exception', path: f.path, line: l.line, snippet: l.text.trim() });
  const hunks = new Set(f.lines.map((l) => l.hunk));
  for (const h of hunks) {
    const side = newSide(f.lines, h);
    side.forEach((l, i) => {
      const next = side.slice(i + 1).find((n) => n.text.trim() !== '' && !/^\s*(?:#|\/\/)/.test(n.text));
      const added = (other?: PatchLine) => l.kind === '+' || other?.kind === '+';
      const py = PY_BLANKET_EXCEPT.exec(l.text);
      if (py) {
        const inline = py[1]!.trim();
        if (
          inline
            ? PY_SWALLOW_BODY.test(inline) && added()
            : next && PY_SWALLOW_BODY.test(next.text.trim()) && added(next)
        )
          flag(l);
        return;
      }
      if (l.kind !== '+' && !(CATCH_OPEN.test(l.text) && next?.kind === '+')) return;
      if (
        EMPTY_CATCH_ONE_LINE.test(l.text) ||
        PROMISE_SWALLOW.test(l.text) ||
        GO_RECOVER.test(l.text) ||
        PY_SUPPRESS.test(l.text)
      )
        flag(l);
      else if (CATCH_OPEN.test(l.text) && next && /^\s*\}/.test(next.text) && added(next)) flag(l);
    });
  }
  return flags;
}

/**
 * The suspicious-patch scan: blanket exception handlers that swallow (bare/blanket except with
 * pass, empty catch blocks, promise catches that drop the error, bare recover()), new skip/xfail/only
 * markers, and changes to CI or test-runner configuration.
 */
export function scanPatch(sections: readonly FilePatch[]): ScanFlag[] {
  const flags: ScanFlag[] = [];
  for (const f of sections) {
    if (CI_PATHS.some((re) => re.test(f.path) || re.test(f.oldPath)))
      flags.push({ kind: 'ci_config_changed', path: f.path, line: null, snippet: '' });
    if (TEST_CONFIG.some((re) => re.test(path.posix.basename(f.path))))
      flags.push({ kind: 'test_config_changed', path: f.path, line: null, snippet: '' });
    for (const l of f.lines) {
      if (l.kind === '+' && SKIP_MARKERS.some((re) => re.test(l.text)))
        flags.push({ kind: 'skip_marker', path: f.path, line: l.line, snippet: l.text.trim() });
    }
    flags.push(...swallowed(f));
  }
  return flags;
}

/**
 * Changes to tests that existed at the base, which make the patch's tests untrustworthy as evidence:
 * a deleted or renamed test file, removed or rewritten lines in an existing test file (deleted
 * tests, relaxed assertions), and skip markers added to an existing test file. Purely additive
 * edits (new test functions appended to an existing file) are not modifications.
 */
export function staticTestModifications(testSections: readonly FilePatch[]): string[] {
  const out: string[] = [];
  for (const f of testSections) {
    if (f.status === 'added') continue;
    if (f.status === 'deleted') {
      out.push(`deleted test file ${f.path}`);
      continue;
    }
    if (f.status === 'renamed') out.push(`renamed test file ${f.oldPath} → ${f.path}`);
    if (f.binary) out.push(`changed binary test file ${f.path}`);
    const removed = f.lines.filter((l) => l.kind === '-' && l.text.trim() !== '');
    if (removed.length > 0)
      out.push(
        `${removed.length} existing line(s) removed or rewritten in ${f.path} (first at line ${removed[0]!.line})`,
      );
    for (const l of f.lines) {
      if (l.kind === '+' && SKIP_MARKERS.some((re) => re.test(l.text)))
        out.push(`skip marker added to ${f.path}:${l.line}`);
    }
  }
  return out;
}
