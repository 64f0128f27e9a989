/**
 * Which tests failed, and the first lines of why, read from a runner's console output: what the
 * model needs first from a failing run. Best effort, like the summary: an empty list when nothing
 * recognisable was printed.
 */

export interface TestFailure {
  id: string;
  message: string;
}

const MESSAGE_LINES = 6;
const MESSAGE_LINE_CHARS = 240;

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

const clip = (line: string) =>
  line.length > MESSAGE_LINE_CHARS ? `${line.slice(0, MESSAGE_LINE_CHARS)}…` : line;

/** Up to MESSAGE_LINES non-empty lines from `lines[from]` on, stopping at the first line matching `stop`. */
function messageAfter(lines: readonly string[], from: number, stop: RegExp): string {
  const out: string[] = [];
  for (let i = from; i < lines.length && out.length < MESSAGE_LINES; i++) {
    const l = lines[i]!;
    if (stop.test(l)) break;
    if (l.trim()) out.push(clip(l.trim()));
  }
  return out.join('\n');
}

type Parser = (lines: readonly string[]) => TestFailure[];

// `FAILED tests/a.py::test_x - assert 1 == 2` in the short summary; the message preferably from the
// `E   ` lines of the test's section (`____ test_x ____`, `____ ERROR at setup of test_x ____`).
const pytest: Parser = (lines) => {
  const header = lines.findIndex((l) => /^=+ short test summary info =+$/.test(l));
  const listed: { id: string; kind: string; short: string }[] = [];
  for (const l of header >= 0 ? lines.slice(header) : lines) {
    const m = /^(FAILED|ERROR) (.+)$/.exec(l);
    if (!m) continue;
    const id = leadingNodeId(m[2]!);
    listed.push({ id, kind: m[1]!, short: m[2]!.slice(id.length).replace(/^ - /, '').trim() });
  }
  if (listed.length === 0) return [];
  const sections = new Map<string, string>();
  lines.forEach((l, i) => {
    const m = /^_{3,} (.+?) _{3,}$/.exec(l);
    if (!m || sections.has(m[1]!)) return;
    const end = lines.findIndex((x, j) => j > i && /^(_{3,} .+ _{3,}|={3,}.*)$/.test(x));
    const errors = lines
      .slice(i + 1, end < 0 ? undefined : end)
      .filter((x) => /^E\s/.test(x))
      .map((x) => clip(x.replace(/^E\s+/, '')));
    if (errors.length > 0) sections.set(m[1]!, errors.slice(0, MESSAGE_LINES).join('\n'));
  });
  return listed.map(({ id, kind, short }) => {
    const name = id.split('::').slice(1).join('.');
    const keys =
      kind === 'ERROR'
        ? [`ERROR at setup of ${name}`, `ERROR at teardown of ${name}`, `ERROR collecting ${id}`]
        : [name];
    const section = keys.map((k) => sections.get(k)).find(Boolean);
    return { id, message: section ?? clip(short) };
  });
};

// `--- FAIL: TestX (0.00s)` followed by the test's indented log lines.
const goTest: Parser = (lines) =>
  lines.flatMap((l, i) => {
    const m = /^\s*--- FAIL: (\S+)/.exec(l);
    return m ? [{ id: m[1]!, message: messageAfter(lines, i + 1, /^\s*(---|===) |^(FAIL|ok|PASS)\b/) }] : [];
  });

// jest: `● Suite › test` then the message; vitest: ` FAIL  file > suite > test` then the message.
const jestLike: Parser = (lines) =>
  lines.flatMap((l, i) => {
    const m = /^\s*● (.+)$/.exec(l) ?? /^\s*FAIL\s+(\S.* > .+)$/.exec(l);
    return m ? [{ id: m[1]!.trim(), message: messageAfter(lines, i + 1, /^\s*●|^\s*FAIL\s|^\s*at /) }] : [];
  });

// node's spec reporter `✖ name (1.2ms)` then the error; TAP `not ok 3 - name` then its YAML `error:`.
const nodeTest: Parser = (lines) =>
  lines.flatMap((l, i) => {
    const spec = /^\s*✖ (.+?)(?: \([\d.]+m?s\))?$/.exec(l);
    if (spec && spec[1] !== 'failing tests:')
      return [{ id: spec[1]!, message: messageAfter(lines, i + 1, /^\s*(✖|✔) |^\s*at /) }];
    const tap = /^\s*not ok \d+ - (.+?)(?: # .*)?$/.exec(l);
    if (!tap) return [];
    const end = lines.findIndex((x, j) => j > i && /^\s*\.\.\.$/.test(x));
    const error = lines.findIndex((x, j) => j > i && (end < 0 || j < end) && /^\s*error:/.test(x));
    const message = error < 0 ? '' : messageAfter(lines, error, /^\s*(code|name|stack|\.\.\.)\b/);
    return [{ id: tap[1]!, message }];
  });

// mocha: after `N failing`, blocks `  1) suite` / `       test:` then the error.
const mocha: Parser = (lines) => {
  const start = lines.findIndex((l) => /^\s*\d+ failing\s*$/.test(l));
  if (start < 0) return [];
  const out: TestFailure[] = [];
  for (let i = start + 1; i < lines.length; i++) {
    const m = /^\s*\d+\) (.+)$/.exec(lines[i]!);
    if (!m) continue;
    const title = [m[1]!.trim()];
    while (!title.at(-1)!.endsWith(':') && i + 1 < lines.length && lines[i + 1]!.trim())
      title.push(lines[++i]!.trim());
    out.push({
      id: title.join(' ').replace(/:$/, ''),
      message: messageAfter(lines, i + 1, /^\s*\d+\) |^\s*at /),
    });
  }
  return out;
};

const PARSERS: Parser[] = [pytest, jestLike, goTest, mocha, nodeTest];

/** The failing tests in a run's output, each once (runners that repeat failures in a summary list them once). */
export function parseFailures(stdout: string, stderr: string): TestFailure[] {
  const lines = `${stdout}\n${stderr}`.split(/\r?\n/);
  for (const parse of PARSERS) {
    const found = parse(lines);
    if (found.length === 0) continue;
    const seen = new Set<string>();
    return found.filter((f) => !seen.has(f.id) && seen.add(f.id));
  }
  return [];
}

// pytest -rA / -v, jest / mocha / node spec ticks, TAP `ok`, go -v.
const PASS_LINE =
  /^(PASSED \S.*|\S+::\S.* PASSED(\s+\[\s*\d+%\])?|\s*[✓✔√] .*|\s*ok \d+ - .*|\s*--- PASS: .*|=== (RUN|PAUSE|CONT) .*)$/;

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
