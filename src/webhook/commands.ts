import { z } from 'zod';

/**
 * `/agenticfix …` comment commands: only at the very start of a comment's first line. An indented line
 * is Markdown for code (or a quote of someone's command), never an instruction.
 */

export type Command =
  | { kind: 'rerun'; model?: string; budget?: number; attempts?: number }
  | { kind: 'revise'; text: string }
  | { kind: 'cancel' }
  | { kind: 'status' }
  | { kind: 'help' };

export type ParsedComment =
  | { type: 'none' } // not addressed to the app
  | { type: 'command'; command: Command }
  | { type: 'invalid'; reason: string }; // addressed to the app but not understood: reply with usage

const PREFIX = '/agenticfix';

export const USAGE = [
  'Usage (first line of a comment):',
  '- `/agenticfix rerun [model=<name>] [budget=<tokens>] [attempts=<n>]`: start a new run for this issue (`attempts`: independent tries, the smallest verified patch is published)',
  "- `/agenticfix revise <what to change>` (on the app's pull request): revise the pull request; the lines after the first are part of the feedback",
  '- `/agenticfix cancel`: stop the active run',
  '- `/agenticfix status`: show the state of the latest run',
  '- `/agenticfix help`: show this message',
].join('\n');

const RERUN_ARGS = z.strictObject({
  model: z
    .string()
    .regex(/^[A-Za-z0-9][\w.:/@-]{0,99}$/, 'letters, digits and . : / @ - _ only (max 100)')
    .optional(),
  budget: z.coerce.number().int().min(1000).optional(), // capped by the operator's ceiling (app.ts)
  attempts: z.coerce.number().int().min(1).optional(), // capped by AGENTICFIX_MAX_ATTEMPTS (on-command.ts)
});

export function parseCommand(body: string): ParsedComment {
  const first = (body.split(/\r?\n/, 1)[0] ?? '').trimEnd();
  const words = first.split(/\s+/);
  if (words[0]?.toLowerCase() !== PREFIX) return { type: 'none' };
  const [verb = '', ...args] = words.slice(1);
  switch (verb.toLowerCase()) {
    case 'cancel':
    case 'status':
    case 'help':
      if (args.length > 0) return { type: 'invalid', reason: `\`${verb}\` takes no arguments` };
      return { type: 'command', command: { kind: verb.toLowerCase() as 'cancel' | 'status' | 'help' } };
    case 'rerun':
      return parseRerun(args);
    case 'revise': {
      // The feedback is the rest of the first line and every line after it.
      const text = body.replace(/^\s*\S+\s+\S+[ \t]*/, '').trim();
      if (!text)
        return {
          type: 'invalid',
          reason: '`revise` needs the change you want, e.g. `/agenticfix revise rename x to y`',
        };
      return { type: 'command', command: { kind: 'revise', text } };
    }
    case '':
      return { type: 'invalid', reason: 'missing command' };
    default:
      return { type: 'invalid', reason: `unknown command \`${verb.slice(0, 40)}\`` };
  }
}

function parseRerun(args: string[]): ParsedComment {
  const fields: Record<string, string> = {};
  for (const arg of args) {
    const m = /^([a-z]+)=(.*)$/i.exec(arg);
    if (!m) return { type: 'invalid', reason: `expected key=value, got \`${arg.slice(0, 40)}\`` };
    const key = m[1]!.toLowerCase();
    if (key in fields) return { type: 'invalid', reason: `\`${key}\` given twice` };
    fields[key] = m[2]!;
  }
  const parsed = RERUN_ARGS.safeParse(fields);
  if (!parsed.success) {
    const reason = parsed.error.issues
      .map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message))
      .join('; ');
    return { type: 'invalid', reason };
  }
  return { type: 'command', command: { kind: 'rerun', ...parsed.data } };
}
