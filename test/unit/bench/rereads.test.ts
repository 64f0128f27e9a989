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
});
