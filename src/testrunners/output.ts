/**
 * A test runner's console output cut into parts by meaning, so that what the model needs (the failures
 * and the closing summary) is kept and what it can do without (captured output of passing tests, pass
 * lines, warnings) is what gets squeezed. Formats: pytest, jest, vitest, mocha, node --test (spec and
 * TAP) and go test; anything else is one part of plain output.
 */

/**
 * What a part is. Inside a failure block: `failure` (the assertion, the error), `context` (the test's
 * code, the traceback), `stack` (stack frames) and `captured` (the failing test's own output).
 */
export type PartKind =
  'summary' | 'failure' | 'other' | 'context' | 'warnings' | 'repeat' | 'stack' | 'captured' | 'passes';

/** Lower is kept longer: a part of rank r is cut only once every part of a higher rank has been. */
export const RANK: Record<PartKind, number> = {
  summary: 0,
  failure: 0,
  other: 1,
  context: 1,
  warnings: 2,
  repeat: 2,
  stack: 2,
  captured: 3,
  passes: 3,
};

export const LABEL: Record<PartKind, string> = {
  summary: 'summary',
  failure: 'failure',
  other: 'output',
  context: 'context',
  warnings: 'warnings',
  repeat: 'repeated failure text',
  stack: 'stack frames',
  captured: 'captured output',
  passes: 'passing tests',
};

export interface Part {
  kind: PartKind;
  lines: string[];
  /** Set on the parts of one failing test's block (its header line is not part of it); `ids`: all tests sharing it. */
  block?: { n: number; id: string; ids: string[] };
}

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;

/** Colour and cursor codes out: they double the size of jest's and vitest's output and mean nothing here. */
export const stripAnsi = (text: string): string => text.replace(ANSI, '');

type Format = 'pytest' | 'jest' | 'vitest' | 'mocha' | 'node-spec' | 'tap' | 'go' | 'plain';

/** Which runner printed the (combined) output, from lines only that runner prints. */
export function detectFormat(text: string): Format {
  if (/^=+ (test session starts|short test summary info|FAILURES|ERRORS) =+$/m.test(text)) return 'pytest';
  if (/^=+ .*\d+ (passed|failed|errors?)\b.* in [\d.]+s\b.*=+$/m.test(text)) return 'pytest';
  if (/^\s*Test Files\s+\d+ |^⎯+ Failed Tests \d+ ⎯+$|^ RUN {2}v\d/m.test(text)) return 'vitest';
  if (/^Tests:\s+.*\d+ total\s*$|^\s*● .+ › /m.test(text)) return 'jest';
  if (/^\s*\d+ passing \(\d+m?s\)\s*$/m.test(text)) return 'mocha';
  if (/^ℹ tests \d+$/m.test(text)) return 'node-spec';
  if (/^TAP version \d+$|^# tests \d+$/m.test(text)) return 'tap';
  if (/^\s*--- FAIL: |^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))/m.test(text)) return 'go';
  return 'plain';
}

/** The line that replaces a failure block in run_tests' output (src/environment/failures.ts). */
export const failurePointer = (id: string) => `[failure of ${id}: in failures]`;
const POINTER = /^\[failure of .+: in failures\]$/;

class Parts {
  readonly list: Part[] = [];
  private blocks = 0;
  private current: { n: number; id: string; ids: string[] } | undefined;
  private filled = false;

  add(given: PartKind, line: string): void {
    // Where run_tests took a failure block out: as short as it gets and says where the failure is.
    const kind = !this.current && POINTER.test(line) ? 'summary' : given;
    if (this.current) this.filled = true;
    const last = this.list.at(-1);
    if (last && last.kind === kind && last.block === this.current) last.lines.push(line);
    else this.list.push({ kind, lines: [line], ...(this.current ? { block: this.current } : {}) });
  }

  /** `share`: a header right after another one (nothing between) names one more test of the same block. */
  startBlock(id: string, share = false): void {
    if (share && this.current && !this.filled) {
      this.current.ids.push(id);
      return;
    }
    this.current = { n: this.blocks++, id, ids: [id] };
    this.filled = false;
  }

  endBlock(): void {
    this.current = undefined;
  }

  get inBlock(): boolean {
    return this.current !== undefined;
  }
}

/** pytest -v / -rA pass lines, jest/mocha/node ticks, TAP `ok`, go -v. */
export const PASS_LINE =
  /^(PASSED \S.*|\s*PASS\s+\S+(\s+\([\d.]+ m?s\))?|\S+::\S.* PASSED(\s+\[\s*\d+%\])?|\s*[✓✔√] .*|\s*ok \d+ - .*|\s*--- PASS: .*|=== (RUN|PAUSE|CONT) .*)$/;

const PYTEST_FINAL =
  /^=*\s*(?:(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)(?:, )?)+|no tests ran) in [\d.]+s\b.*$/;
const PYTEST_TEST = /^_{3,} (.+?) _{3,}$/;

function pytest(lines: readonly string[], p: Parts): void {
  let section = 'other';
  let captured = false; // in a failing test's `Captured stdout call` (or log, stderr) subsection
  for (const line of lines) {
    const header = /^=+ (.+?) =+$/.exec(line);
    if (header || PYTEST_FINAL.test(line)) {
      p.endBlock();
      const title = header?.[1] ?? '';
      if (PYTEST_FINAL.test(line)) section = 'final';
      else if (/^(FAILURES|ERRORS)$/.test(title)) section = 'failures';
      else if (title === 'PASSES') section = 'passes';
      else if (/^warnings summary/.test(title)) section = 'warnings';
      else if (title === 'short test summary info') section = 'short';
      else section = 'other';
      const kind: Record<string, PartKind> = {
        final: 'summary',
        short: 'summary',
        passes: 'captured',
        warnings: 'warnings',
      };
      p.add(kind[section] ?? 'other', line);
    } else if (section === 'failures') {
      const test = PYTEST_TEST.exec(line);
      if (test) {
        p.startBlock(test[1]!);
        captured = false;
        continue;
      }
      if (/^-+ Captured \w+ \w+ -+$/.test(line)) captured = true;
      if (captured) p.add('captured', line);
      else if (/^(E |>)/.test(line) || /^\S+:\d+: \S/.test(line)) p.add('failure', line);
      else p.add('context', line);
    } else if (section === 'passes') p.add('captured', line);
    else if (section === 'warnings') p.add('warnings', line);
    else if (section === 'short') {
      if (PASS_LINE.test(line)) p.add('passes', line);
      // -vv repeats each failure's whole message below its line: the block already has it.
      else if (/^\s/.test(line) || line === '') p.add('repeat', line);
      else p.add('summary', line);
    } else p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
  }
}

function jest(lines: readonly string[], p: Parts): void {
  let mode: 'other' | 'summary' | 'captured' | 'failure' = 'other';
  let file = '';
  for (const line of lines) {
    const bullet = /^\s*● (.+)$/.exec(line);
    file = /^\s*FAIL\s+(\S+)/.exec(line)?.[1] ?? file;
    if (/^(Test Suites|Tests):/.test(line)) mode = 'summary';
    else if (mode === 'summary') {
      // the verdict runs to the end
    } else if (/^(PASS|FAIL)\s+\S/.test(line) || line === 'Summary of all failing tests') mode = 'other';
    else if (bullet && bullet[1] !== 'Console') {
      const title = bullet[1]!.trim();
      p.startBlock(title === 'Test suite failed to run' && file ? `${file} (suite failed to run)` : title);
      mode = 'failure';
      continue;
    } else if (/^\s*console\.(log|info|warn|error|debug|trace)$/.test(line)) mode = 'captured';
    if (mode !== 'failure') p.endBlock();
    if (mode === 'failure') {
      if (/^\s+at /.test(line)) p.add('stack', line);
      else if (/^\s*>?\s*\d+ \|/.test(line) || /^\s+\|/.test(line)) p.add('context', line);
      else p.add('failure', line);
    } else if (mode === 'other') p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
    else p.add(mode, line);
  }
}

function vitest(lines: readonly string[], p: Parts): void {
  let mode: 'other' | 'summary' | 'captured' | 'failure' = 'other';
  for (const line of lines) {
    const fail = /^\s*FAIL\s+(\S.*?)\s*$/.exec(line);
    if (/^\s*Test Files\s/.test(line)) mode = 'summary';
    else if (fail) {
      // Tests that failed with the same error share one block under several FAIL lines.
      p.startBlock(suiteFailure(fail[1]!) ?? fail[1]!, mode === 'failure');
      mode = 'failure';
      continue;
    } else if (/^⎯+(\[\d+\/\d+\])?⎯*$/.test(line) || /^⎯+ .+ ⎯+$/.test(line)) {
      // Separators between blocks and section titles (`Failed Tests 3`).
      p.endBlock();
      mode = 'other';
    } else if (/^(stdout|stderr) \| /.test(line)) mode = 'captured';
    else if (/^\s*[✓↓❯×] /.test(line) && mode !== 'failure') mode = 'other';
    if (mode !== 'failure') p.endBlock();
    if (mode === 'summary') p.add('summary', line);
    else if (mode === 'captured') p.add('captured', line);
    else if (mode === 'failure') {
      if (/^\s*❯ \S+:\d+:\d+/.test(line) || /^\s+\d*\|/.test(line)) p.add('context', line);
      else if (/^\s+at /.test(line) || /^\s*❯ \S+ \S+:\d+:\d+/.test(line)) p.add('stack', line);
      else p.add('failure', line);
    } else p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
  }
}

/** vitest's `FAIL  file [ file ]` (a file that failed to load or has no suite) as `file (suite failed to run)`. */
export function suiteFailure(header: string): string | null {
  const m = /^(\S+) \[ \1 \]$/.exec(header);
  return m ? `${m[1]} (suite failed to run)` : null;
}

function mocha(lines: readonly string[], p: Parts): void {
  let summary = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*\d+ passing \(\d+m?s\)\s*$/.test(line)) summary = true;
    if (!summary) {
      p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
      continue;
    }
    const numbered = /^\s*\d+\) (.+)$/.exec(line);
    if (numbered) {
      // `  1) suite` then `       test:` (titles may wrap over several lines, the last ends with a colon).
      const title = [numbered[1]!.trim()];
      while (!title.at(-1)!.endsWith(':') && i + 1 < lines.length && lines[i + 1]!.trim())
        title.push(lines[++i]!.trim());
      p.startBlock(title.join(' ').replace(/:$/, ''));
    } else if (!p.inBlock) p.add('summary', line);
    else p.add(/^\s+at /.test(line) ? 'stack' : 'failure', line);
  }
}

function nodeSpec(lines: readonly string[], p: Parts): void {
  let repeat = false;
  for (const line of lines) {
    const failed = /^\s*✖ (.+?)(?: \([\d.]+m?s\))?$/.exec(line);
    if (/^ℹ \w+ /.test(line)) {
      p.endBlock();
      p.add('summary', line);
    } else if (line === '✖ failing tests:') {
      p.endBlock();
      repeat = true;
      p.add('other', line);
    } else if (failed) {
      p.startBlock(failed[1]!);
    } else if (/^\s*([✔﹣▶]|# Subtest) /.test(line) || (/^test at /.test(line) && repeat)) {
      p.endBlock();
      p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
    } else if (p.inBlock) p.add(/^\s+at /.test(line) ? 'stack' : 'failure', line);
    else p.add('other', line);
  }
}

function tap(lines: readonly string[], p: Parts): void {
  let yamlEnd: string | null = null;
  let field = '';
  for (const line of lines) {
    const notOk = /^(\s*)not ok \d+ - (.+?)(?: # .*)?$/.exec(line);
    if (yamlEnd !== null) {
      // A YAML block's `error:` is the failure; `stack:` its frames; the rest (expected, actual, location) context.
      if (line === yamlEnd) {
        yamlEnd = null;
        p.endBlock();
      } else if (!/^\s*---$/.test(line)) {
        field = /^\s*(\w+):/.exec(line)?.[1] ?? field;
        p.add(field === 'error' ? 'failure' : field === 'stack' ? 'stack' : 'context', line);
      }
      continue;
    }
    if (notOk) {
      p.startBlock(notOk[2]!);
      yamlEnd = `${notOk[1]}  ...`;
      field = '';
      continue;
    }
    const summary = /^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) /.test(line);
    p.add(summary ? 'summary' : PASS_LINE.test(line) ? 'passes' : 'other', line);
  }
}

function go(lines: readonly string[], p: Parts): void {
  for (const line of lines) {
    const failed = /^\s*--- FAIL: (\S+)/.exec(line);
    if (failed) {
      p.startBlock(failed[1]!);
      continue;
    }
    if (/^\s*(---|===) |^(FAIL|ok|PASS)\b/.test(line)) p.endBlock();
    if (p.inBlock) p.add('failure', line);
    else if (/^(ok|FAIL)\s+\S+\s+/.test(line) || /^(FAIL|PASS|ok)$/.test(line)) p.add('summary', line);
    else p.add(PASS_LINE.test(line) ? 'passes' : 'other', line);
  }
}

const SPLITTERS: Record<Exclude<Format, 'plain'>, (lines: readonly string[], p: Parts) => void> = {
  pytest,
  jest,
  vitest,
  mocha,
  'node-spec': nodeSpec,
  tap,
  go,
};

/**
 * One stream of output cut into parts by meaning, read as `format` (detect it on both streams together:
 * jest prints its verdict on stderr and console output on stdout). Joining the parts' lines with `\n`
 * gives the text back.
 */
export function splitOutput(text: string, format: Format = detectFormat(text)): Part[] {
  const lines = text.split('\n');
  if (format === 'plain') return [{ kind: 'other', lines }];
  const p = new Parts();
  SPLITTERS[format](lines, p);
  return p.list;
}
