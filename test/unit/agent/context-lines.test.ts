import { ContextManager } from '../../../src/agent/context.js';
import { ok } from '../../../src/tools/types.js';

// Results shaped as read_file and search_code return them (src/tools/read-tools.ts).
const V1 = 'a'.repeat(16);
const FILE = Array.from({ length: 400 }, (_, i) => `const line${i + 1} = ${'x'.repeat(40)};`);
const numbered = (from: number, to: number) =>
  FILE.slice(from - 1, to)
    .map((t, i) => `${String(from + i).padStart(5)}| ${t}`)
    .join('\n');
const page = (from: number, to: number, version = V1) =>
  ok({
    path: 'src/a.js',
    version,
    total_lines: FILE.length,
    start_line: from,
    end_line: to,
    content: numbered(from, to),
  });
const found = (...lines: number[]) =>
  ok({ query: 'q', results: lines.map((line) => ({ file: 'src/a.js', line, snippet: FILE[line - 1] })) });

/** An observation as the model sees it (whole or a stub), the fields these tests look at. */
interface Shown {
  success?: boolean;
  data: Record<string, unknown> & {
    around_matches: { from: string; lines: { start_line: number; end_line: number }[] };
  };
}

const params = {
  observationMaxChars: 12_000,
  keepFullObservations: 1,
  compactTokens: 100,
  stubMinSavingTokens: 80,
  smallWholeMaxTokens: 4000,
  readWindowMaxTokens: 1000,
  stubHeadLines: 10,
  searchAroundLines: 8,
  enabled: true,
};

function run(p = params) {
  const ctx = new ContextManager(p, 'S', 'T');
  let n = 0;
  const add = (
    tool: string,
    args: Record<string, unknown>,
    result: ReturnType<typeof ok>,
    mutating = false,
  ) => {
    const id = `c${++n}`;
    ctx.addAssistant({
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: tool, arguments: JSON.stringify(args) } }],
    });
    const text = ctx.addObservation(id, tool, args, result, mutating);
    ctx.compact();
    return { id, text: JSON.parse(text) as Shown };
  };
  const shown = (id: string) =>
    JSON.parse(
      ctx.messages().find((m) => m.role === 'tool' && m.tool_call_id === id)!.content as string,
    ) as Shown;
  return { add, shown };
}

describe('context policy: lines a later call needs, without a turn', () => {
  it('a search whose match lies in a compacted read shows the lines around it again, after its results', () => {
    const { add, shown } = run();
    const first = add('read_file', { path: 'src/a.js' }, page(1, 200));
    add('read_file', { path: 'src/a.js', start_line: 300 }, page(300, 400));
    expect(shown(first.id)).toMatchObject({ compacted: 'read_file', start_line: 1, end_line: 200 });
    const s = add('search_code', { query: 'q' }, found(50));
    // Found: the model saw line 50 only as a stub, and read lines 45-56 again (a turn) before its edit.
    expect(Object.keys(s.text.data)).toEqual(['query', 'results', 'around_matches']);
    expect(s.text.data.around_matches).toEqual({
      from: 'your earlier read_file results, compacted since; the file is unchanged',
      lines: [{ path: 'src/a.js', version: V1, start_line: 42, end_line: 58, content: numbered(42, 58) }],
    });
    // It stays whole like a window of the file (the model works on it next), until the file changes.
    add('run_tests', {}, ok({ status: 'passed', exit_code: 0, output: 'y'.repeat(2000) }));
    expect(shown(s.id).success).toBe(true);
    add('edit_file', { path: 'src/a.js' }, ok({ path: 'src/a.js', version: 'b'.repeat(16) }), true);
    add('git_diff', {}, ok({ diff: 'z'.repeat(2000) }));
    expect(shown(s.id)).toMatchObject({ compacted: 'search_code query=q', stale: true });
  });

  it('not for lines in sight whole, in a read that is not compacted, or of a file changed since', () => {
    const { add } = run();
    add('read_file', { path: 'src/a.js' }, page(1, 200));
    add('read_file', { path: 'src/a.js', start_line: 300 }, page(300, 400));
    // Line 350 is in the newest read (whole); line 50 is shown again once, then it is in sight.
    expect(add('search_code', { query: 'q' }, found(350)).text.data).not.toHaveProperty('around_matches');
    expect(add('search_code', { query: 'q' }, found(50)).text.data.around_matches.lines).toHaveLength(1);
    expect(add('search_code', { query: 'q' }, found(55)).text.data).not.toHaveProperty('around_matches');
    add('edit_file', { path: 'src/a.js' }, ok({ path: 'src/a.js', version: 'b'.repeat(16) }), true);
    expect(add('search_code', { query: 'q' }, found(100)).text.data).not.toHaveProperty('around_matches');
  });

  it("merges windows that touch and stops at three windows' worth of lines (3 × 17) per search", () => {
    const { add } = run();
    add('read_file', { path: 'src/a.js' }, page(1, 200));
    add('read_file', { path: 'src/a.js', start_line: 300 }, page(300, 400));
    const lines = add('search_code', { query: 'q' }, found(20, 30, 100, 140, 180)).text.data.around_matches
      .lines;
    expect(lines.map((e: { start_line: number; end_line: number }) => [e.start_line, e.end_line])).toEqual([
      [12, 38],
      [92, 108],
    ]); // 27 + 17 lines; one more window would pass 51
  });

  it("a compacted page that began at line 1 keeps the file's first lines; one that began later does not", () => {
    const { add, shown } = run();
    const first = add('read_file', { path: 'src/a.js' }, page(1, 200));
    const later = add('read_file', { path: 'src/a.js', start_line: 300 }, page(300, 400));
    add('git_diff', {}, ok({ diff: 'z'.repeat(2000) }));
    // Found: the model read a test file's imports again (lines 1-8) before writing a test next to it.
    expect(shown(first.id)).toMatchObject({ compacted: 'read_file', head: numbered(1, 10) });
    expect(shown(later.id)).toMatchObject({ compacted: 'read_file', start_line: 300 });
    expect(shown(later.id)).not.toHaveProperty('head');
  });

  it('keeps no head of a file changed before the page was compacted, nor with the settings at 0', () => {
    const { add, shown } = run();
    const first = add('read_file', { path: 'src/a.js' }, page(1, 200));
    add('edit_file', { path: 'src/a.js' }, ok({ path: 'src/a.js', version: 'b'.repeat(16) }), true);
    add('git_diff', {}, ok({ diff: 'z'.repeat(2000) }));
    expect(shown(first.id)).toMatchObject({ compacted: 'read_file', stale: true });
    expect(shown(first.id)).not.toHaveProperty('head');
    const off = run({ ...params, stubHeadLines: 0, searchAroundLines: 0 });
    const r = off.add('read_file', { path: 'src/a.js' }, page(1, 200));
    off.add('read_file', { path: 'src/a.js', start_line: 300 }, page(300, 400));
    expect(off.shown(r.id)).not.toHaveProperty('head');
    expect(off.add('search_code', { query: 'q' }, found(50)).text.data).not.toHaveProperty('around_matches');
  });
});
