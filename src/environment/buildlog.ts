import type { BuildLog } from './types.js';

/**
 * Lines that tell a model why a build failed. A long log is mostly download progress; these must
 * survive compaction wherever they appear, or the model cannot recover.
 */
const ERROR_PATTERNS: readonly RegExp[] = [
  /^E: /, // apt: "E: Unable to locate package foo"
  /\bERROR\b/,
  /\berror:/i,
  /No matching distribution/,
  /Could not find a version/,
  /npm ERR!/,
  /returned a non-zero code/, // classic builder: "The command '/bin/sh -c …' returned a non-zero code: 100"
  /did not complete successfully/, // BuildKit wording of the same
  /exit code: \d+/,
  /command not found/,
  /No such file or directory/,
  /pull access denied|manifest unknown|repository does not exist/,
  /\b(Traceback|ModuleNotFoundError|fatal:)/,
];

/** The builder step that ran last before an error: tells the model which command failed. */
const STEP_LINE = /^Step \d+\/\d+ : /;

export interface CompactOptions {
  headLines: number;
  tailLines: number;
  maxErrorLines: number;
  maxLineChars: number;
}

export const DEFAULT_COMPACT: CompactOptions = {
  headLines: 15,
  tailLines: 40,
  maxErrorLines: 40,
  maxLineChars: 400,
};

// The classic builder colours a step's stderr; escape codes would hide `E: …` from the patterns.
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

/**
 * Splits raw build output into lines without terminal colour codes; a carriage return keeps only
 * what a terminal would show last.
 */
export function splitLogLines(raw: string): string[] {
  return raw
    .replace(ANSI, '')
    .split('\n')
    .map((l) => (l.split('\r').findLast((s) => s.trim() !== '') ?? '').trimEnd())
    .filter((l) => l !== '');
}

const clip = (line: string, max: number) => (line.length > max ? `${line.slice(0, max)}…` : line);

/**
 * Compacts a build log: first and last lines plus every line that looks like an error (with the
 * step that produced it), deduplicated and capped. Pure, so it is tested on synthetic logs.
 */
export function compactBuildLog(
  lines: readonly string[],
  exitStatus: BuildLog['exit_status'],
  opts: CompactOptions = DEFAULT_COMPACT,
): BuildLog {
  const total = lines.length;
  const fits = total <= opts.headLines + opts.tailLines;
  const head = (fits ? lines : lines.slice(0, opts.headLines)).map((l) => clip(l, opts.maxLineChars));
  const tail = fits ? [] : lines.slice(total - opts.tailLines).map((l) => clip(l, opts.maxLineChars));

  const errors: string[] = [];
  const seen = new Set<string>();
  const keep = (line: string) => {
    const c = clip(line, opts.maxLineChars);
    if (!seen.has(c)) {
      seen.add(c);
      errors.push(c);
    }
  };
  let lastStep: string | null = null;
  let omitted = 0;
  for (const line of lines) {
    if (STEP_LINE.test(line)) lastStep = line;
    if (!ERROR_PATTERNS.some((p) => p.test(line))) continue;
    if (errors.length >= opts.maxErrorLines) {
      omitted++;
      continue;
    }
    if (lastStep !== null) keep(lastStep);
    keep(line);
  }
  // Keep the first errors (the cause) and say how many later ones were dropped.
  if (omitted > 0) errors.push(`… ${omitted} more error-like lines omitted`);
  return {
    exit_status: exitStatus,
    head,
    tail,
    error_lines: errors,
    total_lines: total,
    truncated: !fits || omitted > 0 || lines.some((l) => l.length > opts.maxLineChars),
  };
}
