import { forcedRereads } from '../../../src/bench/rereads.js';

type Msg = Parameters<typeof forcedRereads>[0][number][number];
const callMsg = (id: string, name: string, args: Record<string, unknown>): Msg => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, function: { name, arguments: JSON.stringify(args) } }],
});
const page = { path: 'a.js', start_line: 1, end_line: 200, version: 'v1' };
const whole = (id: string, data: Record<string, unknown>): Msg => ({
  role: 'tool',
  tool_call_id: id,
  content: JSON.stringify({ success: true, data }),
});
const stub = (id: string, kept: Record<string, unknown> = {}): Msg => ({
  role: 'tool',
  tool_call_id: id,
  content: JSON.stringify({ compacted: 'x', outcome: 'ok', ...kept, stale: false }),
});
const head: Msg[] = [
  { role: 'system', content: 'S' },
  { role: 'user', content: 'T' },
];

describe('forced re-reads (context benchmark)', () => {
  const read1 = callMsg('r1', 'read_file', { path: 'a.js' });
  const read2 = callMsg('r2', 'read_file', { path: 'a.js', start_line: 10, end_line: 20 });
  const lines = { ...page, start_line: 10, end_line: 20 };

  it('counts a read of lines an earlier read showed, when that read is only a stub', () => {
    const before = [...head, read1, stub('r1', page)];
    const after = [...before, read2, whole('r2', lines)];
    expect(forcedRereads([before, after])).toEqual([
      'read_file {"path":"a.js","start_line":10,"end_line":20}',
    ]);
  });

  it('not when the earlier read is whole, the file changed (another version) or other lines are read', () => {
    const shown = [...head, read1, whole('r1', page)];
    expect(forcedRereads([shown, [...shown, read2, whole('r2', lines)]])).toEqual([]);
    const stubbed = [...head, read1, stub('r1', page)];
    const changed = { ...lines, version: 'v2' };
    expect(forcedRereads([stubbed, [...stubbed, read2, whole('r2', changed)]])).toEqual([]);
    const far = callMsg('r3', 'read_file', { path: 'a.js', start_line: 300 });
    const farLines = { ...page, start_line: 300, end_line: 400 };
    expect(forcedRereads([stubbed, [...stubbed, far, whole('r3', farLines)]])).toEqual([]);
  });

  it('counts the same search again while its result is a stub, unless an edit came between', () => {
    const s1 = callMsg('s1', 'search_code', { query: 'roundCents' });
    const s2 = callMsg('s2', 'search_code', { query: 'roundCents' });
    const before = [...head, s1, stub('s1')];
    expect(forcedRereads([before, [...before, s2, whole('s2', {})]])).toHaveLength(1);
    const edited = [...before, callMsg('e', 'edit_file', { path: 'a.js' }), stub('e')];
    expect(forcedRereads([edited, [...edited, s2, whole('s2', {})]])).toEqual([]);
  });

  const numbered = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, k) => `${String(from + k).padStart(5)}| line ${from + k}`).join(
      '\n',
    );

  it("counts a read unless every line of it an earlier read showed is in sight: a stub's head, lines a search showed again", () => {
    const headed = [...head, read1, stub('r1', { ...page, head: numbered(1, 8) })];
    const read8 = callMsg('r2', 'read_file', { path: 'a.js', start_line: 1, end_line: 8 });
    const lines8 = { ...page, start_line: 1, end_line: 8 };
    expect(forcedRereads([headed, [...headed, read8, whole('r2', lines8)]])).toEqual([]);
    // Lines 9-12 are only in the stub: a real model reads them again.
    const read12 = callMsg('r2', 'read_file', { path: 'a.js', start_line: 1, end_line: 12 });
    const lines12 = { ...page, start_line: 1, end_line: 12 };
    expect(forcedRereads([headed, [...headed, read12, whole('r2', lines12)]])).toHaveLength(1);
    const search = callMsg('s', 'search_code', { query: 'x' });
    const again = { path: 'a.js', version: 'v1', start_line: 1, end_line: 14, content: numbered(1, 14) };
    const searched = [...headed, search, whole('s', { results: [], around_matches: { lines: [again] } })];
    expect(forcedRereads([searched, [...searched, read12, whole('r2', lines12)]])).toEqual([]);
  });

  it('counts an edit whose old_text is nowhere in sight (a real model reads it first), not one it sees', () => {
    const edit = callMsg('e', 'edit_file', { path: 'a.js', old_text: 'line 10', new_text: 'y' });
    const done = whole('e', { path: 'a.js', version: 'v2' });
    const blind = [...head, read1, stub('r1', page)];
    expect(forcedRereads([blind, [...blind, edit, done]])).toEqual([
      'edit_file {"path":"a.js","old_text":"line 10","new_text":"y"}',
    ]);
    const seen = [...head, read1, whole('r1', { ...page, content: numbered(1, 12) })];
    expect(forcedRereads([seen, [...seen, edit, done]])).toEqual([]);
    // The model's own earlier call holds the text (it wrote it): in sight.
    const wrote = [...head, callMsg('c', 'create_file', { path: 'a.js', content: 'line 10' }), stub('c')];
    expect(forcedRereads([wrote, [...wrote, edit, done]])).toEqual([]);
  });

  it('counts a failed run made again with no edit between while its result is a stub; not a passing one', () => {
    const t1 = callMsg('t1', 'run_tests', {});
    const t2 = callMsg('t2', 'run_tests', {});
    const failed = [
      ...head,
      t1,
      { ...stub('t1'), content: JSON.stringify({ compacted: 'run_tests', outcome: '2 failed, 4 passed' }) },
    ];
    expect(forcedRereads([failed, [...failed, t2, whole('t2', {})]])).toHaveLength(1);
    const passed = [
      ...head,
      t1,
      { ...stub('t1'), content: JSON.stringify({ compacted: 'run_tests', outcome: '6 passed' }) },
    ];
    expect(forcedRereads([passed, [...passed, t2, whole('t2', {})]])).toEqual([]);
  });
});
