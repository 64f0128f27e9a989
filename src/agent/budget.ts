import type { Config } from '../config/config.js';
import type { StopReason } from './types.js';
import type { Usage } from './model.js';

export type BudgetLimits = Config['budgets'];

/** Counts what a run has spent (tokens as the service reports them, requests, tool calls, time). */
export class Budget {
  readonly tokens: Usage = { prompt: 0, completion: 0, cached: 0, total: 0 };
  requests = 0;
  toolCalls = 0;
  private warned = false;
  private readonly startedAt: number;

  constructor(
    readonly limits: BudgetLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  addRequest(u: Usage): void {
    this.requests++;
    this.tokens.prompt += u.prompt;
    this.tokens.completion += u.completion;
    this.tokens.cached += u.cached;
    this.tokens.total += u.total;
  }

  addToolCall(): void {
    this.toolCalls++;
  }

  elapsedMs(): number {
    return this.now() - this.startedAt;
  }

  /** The limit that is used up, if any; checked before every request. */
  exhausted(): Extract<StopReason, 'token_budget' | 'request_budget' | 'tool_budget' | 'time_budget'> | null {
    if (this.tokens.total >= this.limits.tokens) return 'token_budget';
    if (this.requests >= this.limits.requests) return 'request_budget';
    if (this.toolCalls >= this.limits.toolCalls) return 'tool_budget';
    if (this.elapsedMs() >= this.limits.timeMs) return 'time_budget';
    return null;
  }

  /** What is left of each limit, as the working state shows it to the model. */
  left(): { tokens: number; requests: number; tool_calls: number; time_s: number } {
    const l = this.limits;
    return {
      tokens: Math.max(0, l.tokens - this.tokens.total),
      requests: Math.max(0, l.requests - this.requests),
      tool_calls: Math.max(0, l.toolCalls - this.toolCalls),
      time_s: Math.max(0, Math.round((l.timeMs - this.elapsedMs()) / 1000)),
    };
  }

  toolBudgetLeft(): boolean {
    return this.toolCalls < this.limits.toolCalls;
  }

  /**
   * Once per run, when a limit is close (tokens within the reserve, the last two requests, the last few
   * tool calls or the last tenth of the time): a message asking the model to wrap up while it still can.
   */
  wrapUpWarning(): string | null {
    if (this.warned) return null;
    const l = this.limits;
    const left = this.left();
    const [tokensLeft, requestsLeft, toolsLeft, secondsLeft] = [
      left.tokens,
      left.requests,
      left.tool_calls,
      left.time_s,
    ];
    const close =
      tokensLeft <= l.tokenReserve ||
      requestsLeft <= 2 ||
      toolsLeft <= 3 ||
      secondsLeft * 1000 <= l.timeMs / 10;
    if (!close) return null;
    this.warned = true;
    return (
      `Budget nearly spent: ${tokensLeft} of ${l.tokens} tokens, ${requestsLeft} requests, ${toolsLeft} tool calls ` +
      `and ${secondsLeft}s left. Stop exploring. If your fix is in place, run the tests once and call finish ` +
      `with your summary now; otherwise call finish and say what you found and what remains.`
    );
  }

  snapshot(): Record<string, unknown> {
    return {
      tokens: { ...this.tokens },
      requests: this.requests,
      tool_calls: this.toolCalls,
      elapsed_ms: this.elapsedMs(),
      limits: { ...this.limits },
    };
  }
}
