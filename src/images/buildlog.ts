import type { BuildLog } from '../environment/types.js';
import { BuildFindings } from './build-warnings.js';

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

/** Raw characters kept of one line: room for colour codes around a line of `maxLineChars`. */
const rawCap = (opts: CompactOptions) => 4 * opts.maxLineChars + 64;

/**
 * Compacts a build log as it streams in, in bounded memory whatever the build prints: the first
 * and last lines plus every line that looks like an error (with the step that produced it),
 * deduplicated and capped, and a count of all lines. Raw output is split into lines without colour
 * codes; a carriage return keeps only what a terminal would show last.
 */
export class BuildLogCompactor {
  private readonly head: string[] = [];
  /** The latest lines after the head: cut back to `tailLines` whenever twice as many piled up. */
  private tail: string[] = [];
  private total = 0;
  private clipped = false;
  private readonly errors: string[] = [];
  private readonly seen = new Set<string>();
  private omitted = 0;
  private lastStep: string | null = null;
  /**
   * The line being received: its current `\r` segment and the last non-blank one before it, each
   * kept up to a cap (`cut` when more was dropped).
   */
  private segment = '';
  private segmentCut = false;
  private shown: { text: string; cut: boolean } | null = null;
  /** What a successful build still has to say (engine warnings, steps from the layer cache): sees every line. */
  readonly findings = new BuildFindings();

  constructor(private readonly opts: CompactOptions = DEFAULT_COMPACT) {}

  /** Feeds raw output; a line may span several calls. */
  write(text: string): void {
    let from = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.append(text.slice(from, i));
      from = i + 1;
      this.endSegment();
      if (c === 10) this.endLine();
    }
    this.append(text.slice(from));
  }

  /** Adds one complete line (already split, without a terminator). */
  line(line: string): void {
    if (line === '') return;
    this.findings.line(line);
    const { headLines, tailLines, maxLineChars } = this.opts;
    this.total++;
    if (line.length > maxLineChars) this.clipped = true;
    if (this.head.length < headLines) this.head.push(clip(line, maxLineChars));
    else {
      this.tail.push(clip(line, maxLineChars));
      if (this.tail.length > 2 * tailLines) this.tail.splice(0, this.tail.length - tailLines);
    }
    if (STEP_LINE.test(line)) this.lastStep = line;
    if (!ERROR_PATTERNS.some((p) => p.test(line))) return;
    if (this.errors.length >= this.opts.maxErrorLines) {
      this.omitted++;
      return;
    }
    if (this.lastStep !== null) this.keep(this.lastStep);
    this.keep(line);
  }

  /** The compact log; an unterminated last line counts as a line. */
  result(exitStatus: BuildLog['exit_status']): BuildLog {
    this.endSegment();
    this.endLine();
    const { headLines, tailLines } = this.opts;
    const fits = this.total <= headLines + tailLines;
    // Keep the first errors (the cause) and say how many later ones were dropped.
    const errors =
      this.omitted > 0
        ? [...this.errors, `… ${this.omitted} more error-like lines omitted`]
        : [...this.errors];
    return {
      exit_status: exitStatus,
      head: fits ? [...this.head, ...this.tail] : [...this.head],
      tail: fits ? [] : this.tail.slice(-tailLines),
      error_lines: errors,
      total_lines: this.total,
      truncated: !fits || this.omitted > 0 || this.clipped,
    };
  }

  private append(part: string): void {
    const room = rawCap(this.opts) - this.segment.length;
    if (part.length > room) this.segmentCut = true;
    if (room > 0) this.segment += part.slice(0, room);
  }

  private endSegment(): void {
    const visible = this.segment.replace(ANSI, '');
    if (visible.trim() !== '') this.shown = { text: visible, cut: this.segmentCut };
    this.segment = '';
    this.segmentCut = false;
  }

  private endLine(): void {
    if (this.shown !== null) {
      const text = this.shown.text.trimEnd();
      // A cut line must read as clipped, however short its colour codes left it.
      if (this.shown.cut) this.clipped = true;
      this.line(this.shown.cut ? `${text.slice(0, this.opts.maxLineChars)}…` : text);
    }
    this.shown = null;
  }

  private keep(line: string): void {
    const c = clip(line, this.opts.maxLineChars);
    if (!this.seen.has(c)) {
      this.seen.add(c);
      this.errors.push(c);
    }
  }
}

const clip = (line: string, max: number) => (line.length > max ? `${line.slice(0, max)}…` : line);

/** Compacts a log that is already a list of lines (see BuildLogCompactor). */
export function compactBuildLog(
  lines: readonly string[],
  exitStatus: BuildLog['exit_status'],
  opts: CompactOptions = DEFAULT_COMPACT,
): BuildLog {
  const c = new BuildLogCompactor(opts);
  for (const l of lines) c.line(l);
  return c.result(exitStatus);
}
