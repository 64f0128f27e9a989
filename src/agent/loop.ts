import type { Config } from '../config/config.js';
import type { StopReason } from './types.js';
import type { ToolRegistry } from '../tools/types.js';
import type { RunTrace } from '../trace/trace.js';
import type { Budget } from './budget.js';
import {
  FINISH,
  FINISH_SCHEMA,
  FinishGate,
  FormatGuard,
  NO_TOOL_CALL_NOTE,
  isMalformed,
  parseArguments,
} from './calls.js';
import type { ContextManager } from './context.js';
import { LoopDetector } from './loop-detect.js';
import { ModelCancelled, ModelError, type ModelClient } from './model.js';
import { estimateTokens } from './tokens.js';

export interface LoopInput {
  model: ModelClient;
  registry: ToolRegistry;
  context: ContextManager;
  budget: Budget;
  agent: Config['agent'];
  trace: RunTrace;
  signal?: AbortSignal;
  /** Called after every model reply has been handled. */
  onStep?: () => void;
}

export interface LoopOutcome {
  stop_reason: StopReason;
  summary: string | null;
  error: string | null;
  model_name: string | null;
}

/** The model decides every action: ask it, run the tool calls it returns, feed back the results, until a stop. */
export async function runAgentLoop(a: LoopInput): Promise<LoopOutcome> {
  const { model, registry, context, budget, trace } = a;
  const tools = [...registry.schemas(), FINISH_SCHEMA];
  const finish = new FinishGate(a.agent.noEditNudges);
  const format = new FormatGuard(a.agent.maxFormatErrors);
  const loops = new LoopDetector(a.agent.loopRepeat);
  let modelName: string | null = null;
  const stop = (stop_reason: StopReason, more: Partial<LoopOutcome> = {}): LoopOutcome => {
    trace.event('stop', { stop_reason, ...more });
    return { stop_reason, summary: null, error: null, model_name: modelName, ...more };
  };
  try {
    for (;;) {
      const spent = budget.exhausted(); // before `aborted`: the time budget also aborts the run signal
      if (spent) return stop(spent);
      if (a.signal?.aborted) return stop('cancelled');
      const warning = budget.wrapUpWarning();
      if (warning) {
        context.addNote(warning);
        trace.event('budget_warning', { message: warning });
      }
      const compacted = context.compact();
      if (compacted) trace.event('context_compacted', { ...compacted });
      const reply = await model.complete(context.messages(), tools, a.signal);
      const cost = budget.addRequest(reply.usage);
      modelName = reply.model;
      trace.event('model_reply', {
        model: reply.model,
        usage: reply.usage,
        cost_usd: cost,
        ...reply.message,
      });
      // A reply over the budget is not appended nor are its calls run: it would be sent with every request
      // after it, and a half-done change made past the budget is not the model's considered work.
      if (budget.replyOverBudget(reply.usage, estimateTokens(JSON.stringify(reply.message))))
        return stop('token_budget');
      context.addAssistant(reply.message);
      if (reply.message.tool_calls.length === 0) context.addNote(NO_TOOL_CALL_NOTE);
      let wellFormed = false;
      for (const call of reply.message.tool_calls) {
        const name = call.function.name;
        const parsed = parseArguments(call);
        const args = parsed.ok ? parsed.args : null;
        if (name === FINISH) {
          const d = finish.decide(parsed, registry.hasEdits());
          if (d.kind === 'completed') return stop('completed', { summary: d.summary });
          if (d.kind === 'no_edit_stop') return stop('no_edit_stop');
          trace.event('finish_rejected', { error_code: d.result.error_code, error: d.result.error });
          context.addObservation(call.id, name, args, d.result, false);
          wellFormed ||= !isMalformed(d.result);
          continue;
        }
        if (!budget.toolBudgetLeft()) return stop('tool_budget');
        if (!parsed.ok) trace.event('malformed_call', { tool: name, arguments: call.function.arguments });
        const result = parsed.ok ? await registry.call(name, parsed.args) : parsed.result;
        budget.addToolCall();
        const obs = context.addObservation(call.id, name, args, result, a.registry.mutates(name));
        if (result.fatal)
          return stop(result.error_code === 'infra_error' ? 'infra_error' : 'fatal', { error: result.error });
        wellFormed ||= !isMalformed(result);
        if (loops.record(name, args ?? call.function.arguments, obs)) return stop('loop_detected');
      }
      a.onStep?.();
      if (format.reply(wellFormed))
        return stop('format_error', { error: 'too many malformed replies in a row' });
    }
  } catch (err) {
    if (err instanceof ModelCancelled) return stop(budget.exhausted() ?? 'cancelled', { error: err.message });
    if (err instanceof ModelError) return stop('model_error', { error: err.message });
    throw err;
  }
}
