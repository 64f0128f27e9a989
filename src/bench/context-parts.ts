import { promptText } from '../agent/tokens.js';

/** One chat-completions request as sent: its prompt tokens, the part served from cache, and its body. */
export interface Sent {
  prompt_tokens: number;
  cached_tokens: number;
  messages: { role: string; content?: string | null }[];
  tools: unknown;
}

/** The parts of a request the breakdown bills separately. */
const PARTS = [
  'tool_schemas',
  'system_prompt',
  'task',
  'assistant',
  // Tool results (whole or stubbed) sent uncached: first showings, and any resent after a cache break.
  'results_uncached',
  // Tool results served from the cache: the history carried along.
  'results_cached',
  // The host's working-state and budget notes.
  'notes',
] as const;
type Part = (typeof PARTS)[number];

/** Which part a message is; the first user message is the task. */
const partOf = (m: Sent['messages'][number], i: number): Part =>
  m.role === 'system'
    ? 'system_prompt'
    : m.role === 'assistant'
      ? 'assistant'
      : m.role === 'tool'
        ? 'results_uncached'
        : i === 1
          ? 'task'
          : 'notes';

/**
 * Billed tokens of a run by part (uncached + `price` × cached, a token being four characters): each
 * request's prompt text split where its parts start (JSON framing goes with the part it opens). The
 * parts add up to the run's billed tokens, give or take rounding.
 */
export function billedByPart(sent: Sent[], price: number): Record<Part, number> {
  const chars = Object.fromEntries(PARTS.map((p) => [p, 0])) as Record<Part, number>;
  for (const r of sent) {
    const text = promptText(r.messages, r.tools);
    // promptText is JSON.stringify([tools, messages]); the same text built piece by piece gives the offsets.
    const pieces: [Part, string][] = [
      ['tool_schemas', `[${JSON.stringify(r.tools)},[`],
      ...r.messages.map((m, i): [Part, string] => [partOf(m, i), (i ? ',' : '') + JSON.stringify(m)]),
    ];
    if (pieces.reduce((n, [, s]) => n + s.length, 2) !== text.length)
      throw new Error('billedByPart: the pieces do not add up to the prompt text');
    const cachedChars = Math.min(text.length, r.cached_tokens * 4);
    let at = 0;
    for (const [part, s] of pieces) {
      const cached = Math.max(0, Math.min(s.length, cachedChars - at));
      at += s.length;
      // A tool result's cached part is carried history; its uncached part stays where it is.
      chars[part] += s.length - cached;
      chars[part === 'results_uncached' ? 'results_cached' : part] += price * cached;
    }
  }
  return Object.fromEntries(PARTS.map((p) => [p, Math.round(chars[p] / 4)])) as Record<Part, number>;
}
