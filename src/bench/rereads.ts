/**
 * Forced re-reads: calls that fetch again what the model had already seen, because the context policy
 * showed it only as a stub when the call was made. Each costs a real model a turn (a whole request) and
 * the content again uncached. Counted from what was sent: request `i`'s messages and the call its reply
 * made (in request `i + 1`). A read of a file is forced when an earlier read of the same file at the
 * same version covered its first line and every such read is stubbed; a search or listing when the
 * same call was made before with no edit since and is stubbed. Re-reads after a change are not forced.
 */
type Message = {
  role: string;
  content?: string | null;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
};

interface Seen {
  tool: string;
  args: Record<string, unknown>;
  /** A stub in this request; null when shown whole. */
  stubbed: boolean;
  path?: string;
  start?: number;
  end?: number;
  version?: string;
  /** Successful edits before this call. */
  edits: number;
}

const EDITS = new Set(['edit_file', 'create_file', 'delete_file']);
const SAME_CALL = new Set(['search_code', 'list_files']);

const parse = (s: string | null | undefined): Record<string, unknown> => {
  try {
    const v: unknown = JSON.parse(s ?? '');
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

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
    const shown = (stubbed ? o : (o.data ?? {})) as Record<string, unknown>;
    const ok = stubbed ? o.outcome === 'ok' : o.success === true;
    out.push({
      ...call,
      stubbed,
      edits,
      path: typeof shown.path === 'string' ? shown.path : undefined,
      start: typeof shown.start_line === 'number' ? shown.start_line : undefined,
      end: typeof shown.end_line === 'number' ? shown.end_line : undefined,
      version: typeof shown.version === 'string' ? shown.version : undefined,
    });
    if (ok && EDITS.has(call.tool)) edits++;
  }
  return out;
}

/** The calls (`tool args`) that were forced re-reads, over the requests of one run in order. */
export function forcedRereads(requests: Message[][]): string[] {
  const forced: string[] = [];
  for (let i = 0; i + 1 < requests.length; i++) {
    const before = observations(requests[i]!);
    // The call the reply to request i made, as shown (whole or stubbed) in the next request.
    const made = observations(requests[i + 1]!).slice(before.length);
    for (const call of made) {
      const same = before.filter((o) =>
        call.tool === 'read_file'
          ? o.tool === 'read_file' &&
            o.path === call.path &&
            o.version === call.version &&
            o.start !== undefined &&
            o.end !== undefined &&
            (call.start ?? 1) >= o.start &&
            (call.start ?? 1) <= o.end
          : SAME_CALL.has(call.tool) &&
            o.tool === call.tool &&
            o.edits === call.edits &&
            JSON.stringify(o.args) === JSON.stringify(call.args),
      );
      if (same.length > 0 && same.every((o) => o.stubbed))
        forced.push(`${call.tool} ${JSON.stringify(call.args)}`);
    }
  }
  return forced;
}
