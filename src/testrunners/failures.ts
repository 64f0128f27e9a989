import { detectFormat, failurePointer, PASS_LINE, splitOutput, stripAnsi, type Part } from './output.js';
import { fitParts } from './output-fit.js';

/**
 * Which tests failed, and why, read from a runner's console output: what the model needs first from a
 * failing run. Each failing test's whole block (the assertion with its diff, the test's code, the
 * stack, its captured output) is cut by meaning to MESSAGE_MAX_CHARS, the assertion kept longest. Best
 * effort, like the summary: an empty list when nothing recognisable was printed.
 */

export interface TestFailure {
  id: string;
  message: string;
  /** The runner stopped the test at its own per-test timeout (jest, vitest, mocha). */
  timeout?: true;
}

/** jest's, vitest's and mocha's words for a test they stopped at their per-test timeout. */
const RUNNER_TIMEOUT =
  /Exceeded timeout of \d+ ?ms for a (test|hook)|Test timed out in \d+ ?ms|Timeout of \d+ ?ms exceeded/;

/** Generous: a long assertion diff fits whole, and three such failures still fit one observation. */
export const MESSAGE_MAX_CHARS = 4000;
/** A pytest short-summary line (`FAILED id - message`) kept to this length when its block is in `failures`. */
const SUMMARY_LINE_CHARS = 240;

/** The node id at the start of `rest`: up to the first space outside parametrize brackets. */
export function leadingNodeId(rest: string): string {
  let depth = 0;
  for (let i = 0; i < rest.length; i++) {
    const c = rest[i];
    if (c === '[') depth++;
    else if (c === ']') depth = Math.max(0, depth - 1);
    else if (c === ' ' && depth === 0) return rest.slice(0, i);
  }
  return rest;
}

/** A block's lines without the indentation they all share (jest and mocha indent them). */
function dedent(parts: Part[]): Part[] {
  const indents = parts.flatMap((p) => p.lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  const n = indents.length ? Math.min(...indents) : 0;
  return parts.map((p) => ({ ...p, lines: p.lines.map((l) => l.slice(n)) }));
}

/** A block's message: its parts without leading and trailing blank lines, cut by meaning. */
function blockMessage(parts: Part[]): string {
  const trimmed = dedent(parts);
  const lines = () => trimmed.flatMap((p) => p.lines);
  while (trimmed.length && !lines()[0]!.trim()) {
    trimmed[0]!.lines.shift();
    if (trimmed[0]!.lines.length === 0) trimmed.shift();
  }
  while (trimmed.length && !lines().at(-1)!.trim()) {
    trimmed.at(-1)!.lines.pop();
    if (trimmed.at(-1)!.lines.length === 0) trimmed.pop();
  }
  return fitParts(trimmed, MESSAGE_MAX_CHARS).text;
}

/** pytest names a block `test_x`, `TestC.test_p[2]` or `ERROR at setup of test_x`; the short summary has node ids. */
function pytestIds(text: string): Map<string, string> {
  const ids = new Map<string, string>();
  for (const m of text.matchAll(/^(FAILED|ERROR) (.+)$/gm)) {
    const id = leadingNodeId(m[2]!);
    const name = id.split('::').slice(1).join('.');
    const keys =
      m[1] === 'ERROR'
        ? [`ERROR at setup of ${name}`, `ERROR at teardown of ${name}`, `ERROR collecting ${id}`]
        : [name];
    for (const k of keys) if (!ids.has(k)) ids.set(k, id);
  }
  return ids;
}

/** What a run's output says about its failures, and the output without them. */
export interface ShapedOutput {
  failures: TestFailure[];
  stdout: string;
  stderr: string;
}

/**
 * The failing tests of a run and its two streams with each failure block replaced by one line that
 * points to it, so that no failure is shown twice; ANSI codes are stripped first. Pass lines are left
 * in (see omitPassLines).
 */
export function shapeOutput(rawStdout: string, rawStderr: string): ShapedOutput {
  const stdout = stripAnsi(rawStdout);
  const stderr = stripAnsi(rawStderr);
  const format = detectFormat(`${stdout}\n${stderr}`);
  const streams = [splitOutput(stdout, format), splitOutput(stderr, format)];
  const ids = format === 'pytest' ? pytestIds(`${stdout}\n${stderr}`) : new Map<string, string>();
  const byId = new Map<string, TestFailure>();
  const shaped = streams.map((parts) => {
    const out: string[] = [];
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (part.kind === 'repeat') {
        // pytest -vv repeats each failure's message in its short summary: the block has it already.
        if (part.lines.some((l) => l.trim()))
          out.push(`[... ${part.lines.length} lines repeating a failure's message left out ...]`);
        continue;
      }
      if (!part.block) {
        out.push(...part.lines);
        continue;
      }
      let j = i;
      while (j + 1 < parts.length && parts[j + 1]!.block === part.block) j++;
      const block = parts.slice(i, j + 1);
      i = j;
      const message = blockMessage(block);
      // A suite that failed because its tests did (node's spec mark, TAP's subtestsFailed): they are listed.
      if (!message.trim() || /failureType: 'subtestsFailed'/.test(message)) continue;
      // vitest prints one block under several FAIL lines when tests share an error: one failure each.
      for (const name of part.block.ids) {
        const id = ids.get(name) ?? name;
        if (byId.has(id)) continue;
        byId.set(id, { id, message, ...(RUNNER_TIMEOUT.test(message) ? { timeout: true as const } : {}) });
        out.push(failurePointer(id));
      }
    }
    return out.join('\n');
  });
  // pytest lists failing tests it printed no block for (--tb=no, -x): their short-summary message.
  for (const [, id] of ids) if (!byId.has(id)) byId.set(id, { id, message: '' });
  const failures = [...byId.values()];
  const summaryMessage = (id: string) =>
    new RegExp(`^(?:FAILED|ERROR) ${escape(id)}(?: - (.*))?$`, 'm').exec(`${stdout}\n${stderr}`)?.[1] ?? '';
  for (const f of failures) if (!f.message) f.message = summaryMessage(f.id);
  const clipSummary = (text: string) =>
    format !== 'pytest'
      ? text
      : text.replace(/^(?:FAILED|ERROR) .*$/gm, (l) =>
          l.length > SUMMARY_LINE_CHARS ? `${l.slice(0, SUMMARY_LINE_CHARS)}…` : l,
        );
  return { failures, stdout: clipSummary(shaped[0]!), stderr: clipSummary(shaped[1]!) };
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const TAP_SUBTEST = /^\s*# Subtest: /;
const YAML_START = /^(\s*)---$/;

/**
 * The output with every run of pass lines replaced by one line saying how many were left out. A TAP
 * pass (node --test) goes whole: its `# Subtest:` header, the `ok` line and its YAML block.
 */
export function omitPassLines(text: string): { text: string; omitted: number } {
  const lines = text.split('\n');
  const out: string[] = [];
  let held: string[] = []; // `# Subtest:` headers, kept only if their test does not pass
  let run = 0;
  let omitted = 0;
  const flush = () => {
    if (run > 0) out.push(`[... ${run} passing-test lines left out ...]`);
    omitted += run;
    run = 0;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (TAP_SUBTEST.test(line)) {
      held.push(line);
      continue;
    }
    if (PASS_LINE.test(line)) {
      run += held.length + 1;
      held = [];
      const yaml = YAML_START.exec(lines[i + 1] ?? '');
      if (yaml) {
        const end = lines.indexOf(`${yaml[1]}...`, i + 2);
        if (end > 0) {
          run += end - i;
          i = end;
        }
      }
      continue;
    }
    flush();
    out.push(...held, line);
    held = [];
  }
  flush();
  out.push(...held);
  return omitted ? { text: out.join('\n'), omitted } : { text, omitted };
}

/**
 * Identical lines repeated through the output (a runner's hint printed after every timed-out test) kept
 * once, where first seen, with how many times they were printed. Blank and short lines stay as they are.
 */
export function collapseRepeats(text: string): { text: string; collapsed: number } {
  const lines = text.split('\n');
  const seen = new Map<string, number>();
  for (const l of lines) if (l.trim().length >= 20) seen.set(l, (seen.get(l) ?? 0) + 1);
  let collapsed = 0;
  const out: string[] = [];
  const shown = new Set<string>();
  for (const l of lines) {
    const n = seen.get(l) ?? 1;
    if (n < 2) out.push(l);
    else if (shown.has(l)) collapsed++;
    else {
      shown.add(l);
      out.push(`${l} [printed ${n} times]`);
    }
  }
  return collapsed ? { text: out.join('\n'), collapsed } : { text, collapsed };
}
