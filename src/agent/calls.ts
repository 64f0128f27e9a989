import { z } from 'zod';
import { fail, toolParameters, type ToolResult, type ToolSchema } from '../tools/types.js';
import type { RawToolCall } from './model.js';

/** `finish` is handled by the loop itself, not the registry: it ends the run. */
export const FINISH = 'finish';
const FinishArgs = z.strictObject({
  summary: z
    .string()
    .min(1)
    .max(8000)
    .describe('What you changed, and why it fixes the issue (name the test that reproduces it).'),
});

export const FINISH_SCHEMA: ToolSchema = {
  type: 'function',
  function: {
    name: FINISH,
    description:
      'End the run once the fix is in place and the tests pass. Only call this after changing files.',
    parameters: toolParameters(FinishArgs),
  },
};

export type ParsedArgs = { ok: true; args: unknown } | { ok: false; result: ToolResult };

/** Arguments arrive as text; text that is not a JSON object goes back to the model as a structured error. */
export function parseArguments(call: RawToolCall): ParsedArgs {
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments || '{}');
  } catch (err) {
    return {
      ok: false,
      result: fail(
        'invalid_arguments',
        `arguments of ${call.function.name} are not valid JSON: ${(err as Error).message}`,
      ),
    };
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) {
    return {
      ok: false,
      result: fail('invalid_arguments', `arguments of ${call.function.name} must be a JSON object`),
    };
  }
  return { ok: true, args };
}

/** A call the model got wrong in form rather than substance (counts towards format_error). */
export const isMalformed = (r: ToolResult): boolean =>
  r.error_code === 'unknown_tool' || r.error_code === 'invalid_arguments';

export type FinishDecision =
  | { kind: 'completed'; summary: string }
  | { kind: 'no_edit_stop' }
  | { kind: 'rejected'; result: ToolResult };

/** Decides a `finish` call: invalid arguments are rejected; finishing without any edit is nudged, then stopped. */
export class FinishGate {
  private nudges = 0;

  constructor(private readonly maxNudges: number) {}

  decide(parsed: ParsedArgs, hasEdits: boolean): FinishDecision {
    if (!parsed.ok) return { kind: 'rejected', result: parsed.result };
    const args = FinishArgs.safeParse(parsed.args);
    if (!args.success)
      return { kind: 'rejected', result: fail('invalid_arguments', z.prettifyError(args.error)) };
    if (hasEdits) return { kind: 'completed', summary: args.data.summary };
    if (this.nudges >= this.maxNudges) return { kind: 'no_edit_stop' };
    this.nudges++;
    return {
      kind: 'rejected',
      result: fail(
        'no_op',
        `You have not changed any file, so there is nothing to finish (reminder ${this.nudges} of ${this.maxNudges}). ` +
          'Reproduce the issue with a failing test, fix the code, run the tests, then call finish.',
      ),
    };
  }
}

/** Counts malformed replies in a row; `true` once the limit is reached. */
export class FormatGuard {
  private inARow = 0;

  constructor(private readonly max: number) {}

  reply(wellFormed: boolean): boolean {
    this.inARow = wellFormed ? 0 : this.inARow + 1;
    return this.inARow >= this.max;
  }
}

export const NO_TOOL_CALL_NOTE =
  'Your reply contained no tool call. Act only through tool calls; call finish with a summary when you are done.';
