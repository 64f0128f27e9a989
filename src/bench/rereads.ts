/**
 * Forced re-reads: calls that fetch again what the model had already seen, because the context policy
 * showed it only as a stub when the call was made, and edits made without the text they replace in
 * sight. Each costs a real model a turn (a whole request) and the content again uncached. Counted from
 * what was sent: request `i`'s messages and the call its reply made (in request `i + 1`).
 * - A read is forced when some of its lines were shown before at the same file version and are not
 *   all in sight whole now (a whole read, a stub's kept head, lines a search showed again).
 * - A search, listing, or a run that failed, when the same call was made before with no edit since
 *   and is stubbed (a passing run's stub says all there is: its outcome).
 * - A successful edit whose `old_text` is nowhere in sight: a real model reads the lines first.
 * Re-reads after a change are not forced.
 */
type Message = {
  role: string;
  content?: string | null;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
};

/** Lines `start`..`end` of a file version. */
interface Range {
  path: string;
  version: string;
  start: number;
  end: number;
}

interface Seen {
  tool: string;
  args: Record<string, unknown>;
  stubbed: boolean;
  ok: boolean;
  outcome: string;
  /** The lines the call showed when it was made. */
  showed: Range[];
  /** The lines it shows whole in this request. */
  shows: Range[];
  /** Successful edits before this call. */
  edits: number;
}

const EDITS = new Set(['edit_file', 'create_file', 'delete_file']);
const SAME_CALL = new Set(['search_code', 'list_files']);
const RUNS = new Set(['run_tests', 'run_command']);
const FAILED = /failed|error|exit code [1-9]/;

const parse = (s: string | null | undefined): Record<string, unknown> => {
  try {
    const v: unknown = JSON.parse(s ?? '');
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

/** The range `o` names (a read's result or stub, an excerpt), or null. */
function rangeOf(o: Record<string, unknown>, lines?: { start: number; content: unknown }): Range | null {
  const { path, version } = o;
  if (typeof path !== 'string' || typeof version !== 'string') return null;
  if (lines) {
    if (typeof lines.content !== 'string') return null;
    return { path, version, start: lines.start, end: lines.start + lines.content.split('\n').length - 1 };
  }
  const { start_line: start, end_line: end } = o;
  return typeof start === 'number' && typeof end === 'number' ? { path, version, start, end } : null;
}

/** The lines an observation shows whole: a read's, a stub's head, a search's lines shown again. */
function shownWhole(tool: string, o: Record<string, unknown>, stubbed: boolean): Range[] {
  if (stubbed) {
    const head = rangeOf(o, { start: 1, content: o.head });
    return head ? [head] : [];
  }
  const data = (o.data ?? {}) as Record<string, unknown>;
  if (tool === 'read_file') return [rangeOf(data)].filter((r) => r !== null);
  const again = (data.around_matches as { lines?: unknown } | undefined)?.lines;
  return (Array.isArray(again) ? (again as Record<string, unknown>[]) : [])
    .map((e) => rangeOf(e))
    .filter((r) => r !== null);
}

/** Every call in `messages` with what its observation shows, in order. */
function observations(messages: Message[]): Seen[] {
  const calls = new Map<string, { tool: string; args: Record<string, unknown> }>();
  const out: Seen[] = [];
  let edits = 0;
  for (const m of messages) {
    for (const c of m.tool_calls ?? [])
      calls.set(c.id, { tool: c.function.name, args: parse(c.function.arguments) });
    const call = m.role === 'tool' ? calls.get(m.tool_call_id ?? '') : undefined;
    if (!call) continue;
    const o = parse(m.content);
    const stubbed = 'compacted' in o;
    const ok = stubbed ? o.outcome === 'ok' : o.success === true;
    const read =
      call.tool === 'read_file' ? rangeOf(stubbed ? o : ((o.data ?? {}) as Record<string, unknown>)) : null;
    out.push({
      ...call,
      stubbed,
      ok,
      outcome: typeof o.outcome === 'string' ? o.outcome : '',
      edits,
      showed: read ? [read] : [],
      shows: shownWhole(call.tool, o, stubbed),
    });
    if (ok && EDITS.has(call.tool)) edits++;
  }
  return out;
}

const lines = (r: Range): number[] => Array.from({ length: r.end - r.start + 1 }, (_, k) => r.start + k);
const within = (line: number, r: Range) => line >= r.start && line <= r.end;

/** Every string in a value (as JSON holds it), read lines without their `   6| ` numbers. */
function strings(v: unknown): string[] {
  if (typeof v === 'string') return [v.replace(/^ *\d+\| ?/gm, '')];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v && typeof v === 'object') return Object.values(v).flatMap(strings);
  return [];
}

/** What the model sees of a request's text whole: observations not stubbed (or a stub's head), its own calls. */
function inSight(messages: Message[]): string {
  return messages
    .flatMap((m) =>
      m.role === 'tool'
        ? strings('compacted' in parse(m.content) ? parse(m.content).head : parse(m.content))
        : (m.tool_calls ?? []).flatMap((c) => strings(parse(c.function.arguments))),
    )
    .join('\n');
}

/** Whether `call` (made in reply to the request whose observations are `before`) fetched what a stub hid. */
function forced(call: Seen, before: Seen[]): boolean {
  if (call.tool === 'read_file') {
    const [r] = call.shows;
    if (!r) return false;
    const same = (x: Range) => x.path === r.path && x.version === r.version;
    const showed = before.flatMap((o) => o.showed.filter(same));
    const sight = before.flatMap((o) => o.shows.filter(same));
    const needed = lines(r).filter((l) => showed.some((x) => within(l, x)));
    return needed.some((l) => !sight.some((x) => within(l, x)));
  }
  if (!SAME_CALL.has(call.tool) && !RUNS.has(call.tool)) return false;
  const same = before.filter(
    (o) =>
      o.tool === call.tool && o.edits === call.edits && JSON.stringify(o.args) === JSON.stringify(call.args),
  );
  if (RUNS.has(call.tool) && !same.some((o) => FAILED.test(o.outcome))) return false;
  return same.length > 0 && same.every((o) => o.stubbed);
}

/** The calls (`tool args`) that were forced re-reads, over the requests of one run in order. */
export function forcedRereads(requests: Message[][]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < requests.length; i++) {
    const before = observations(requests[i]!);
    // The calls the reply to request i made, as shown (whole or stubbed) in the next request.
    for (const call of observations(requests[i + 1]!).slice(before.length)) {
      const text = call.args.old_text;
      const blind =
        call.tool === 'edit_file' &&
        call.ok &&
        typeof text === 'string' &&
        !inSight(requests[i]!).includes(text);
      if (forced(call, before) || blind) out.push(`${call.tool} ${JSON.stringify(call.args)}`);
    }
  }
  return out;
}
