import type { Config } from '../config/config.js';
import { usd, type ModelPrice } from '../config/prices.js';
import type { StopReason } from './types.js';
import type { Usage } from './model.js';
import { requestCostUsd } from './tokens.js';

export type BudgetLimits = Config['budgets'];

export interface BudgetOptions {
  /** The price of the model the run asks for; null: what the run costs is unknown. */
  price?: ModelPrice | null;
  now?: () => number;
}

/** Counts what a run has spent (tokens as the service reports them, their cost, requests, tool calls, time). */
export class Budget {
  readonly tokens: Usage = { prompt: 0, completion: 0, cached: 0, total: 0 };
  /** USD spent on model requests; null when the model has no price. */
  costUsd: number | null;
  requests = 0;
  toolCalls = 0;
  /** Some reply came without usage: its tokens (and their cost) are estimated from sizes. */
  estimated = false;
  private warned = false;
  private readonly startedAt: number;
  private readonly price: ModelPrice | null;
  private readonly now: () => number;

  constructor(
    readonly limits: BudgetLimits,
    o: BudgetOptions = {},
  ) {
    this.price = o.price ?? null;
    this.costUsd = this.price ? 0 : null;
    this.now = o.now ?? Date.now;
    this.startedAt = this.now();
  }

  /** Counts one request; returns what it cost (null: unknown). */
  addRequest(u: Usage): number | null {
    this.requests++;
    this.tokens.prompt += u.prompt;
    this.tokens.completion += u.completion;
    this.tokens.cached += u.cached;
    this.tokens.total += u.total;
    this.estimated ||= u.estimated === true;
    if (!this.price || this.costUsd === null) return null;
    const cost = requestCostUsd(this.price, u);
    this.costUsd += cost;
    return cost;
  }

  /**
   * Whether the last reply takes the run past its token budget, at its size as the service counted it
   * or, when the service says less, as its text measures (`size` tokens): such a reply is not acted on.
   */
  replyOverBudget(last: Usage, size: number): boolean {
    return this.tokens.total + Math.max(0, size - last.completion) > this.limits.tokens;
  }

  addToolCall(): void {
    this.toolCalls++;
  }

  elapsedMs(): number {
    return this.now() - this.startedAt;
  }

  /**
   * The limit that is used up, if any; checked before every request. A cost limit with an unknown
   * cost counts as used up: no request is made that the budget cannot measure.
   */
  exhausted(): Extract<
    StopReason,
    'token_budget' | 'cost_budget' | 'request_budget' | 'tool_budget' | 'time_budget'
  > | null {
    if (this.tokens.total >= this.limits.tokens) return 'token_budget';
    if (this.limits.costUsd !== null && (this.costUsd === null || this.costUsd >= this.limits.costUsd))
      return 'cost_budget';
    if (this.requests >= this.limits.requests) return 'request_budget';
    if (this.toolCalls >= this.limits.toolCalls) return 'tool_budget';
    if (this.elapsedMs() >= this.limits.timeMs) return 'time_budget';
    return null;
  }

  /** What is left of each limit, as the working state shows it to the model (USD only with a cost limit). */
  left(): { tokens: number; requests: number; tool_calls: number; time_s: number; cost_usd?: number } {
    const l = this.limits;
    return {
      tokens: Math.max(0, l.tokens - this.tokens.total),
      requests: Math.max(0, l.requests - this.requests),
      tool_calls: Math.max(0, l.toolCalls - this.toolCalls),
      time_s: Math.max(0, Math.round((l.timeMs - this.elapsedMs()) / 1000)),
      ...(l.costUsd !== null ? { cost_usd: this.costLeft() } : {}),
    };
  }

  /** USD left of the cost limit (rounded to a hundredth of a cent); 0 when the cost is unknown. */
  private costLeft(): number {
    const limit = this.limits.costUsd ?? 0;
    return this.costUsd === null ? 0 : Math.max(0, Math.round((limit - this.costUsd) * 1e4) / 1e4);
  }

  toolBudgetLeft(): boolean {
    return this.toolCalls < this.limits.toolCalls;
  }

  /**
   * Once per run, when a limit is close (tokens within the reserve, the last two requests, the last few
   * tool calls, the last tenth of the time or of the cost limit): a message asking the model to wrap up
   * while it still can.
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
      secondsLeft * 1000 <= l.timeMs / 10 ||
      (l.costUsd !== null && this.costLeft() <= l.costUsd / 10);
    if (!close) return null;
    this.warned = true;
    const cost = l.costUsd !== null ? `, ${usd(this.costLeft())} of ${usd(l.costUsd)}` : '';
    return (
      `Budget nearly spent: ${tokensLeft} of ${l.tokens} tokens${cost}, ${requestsLeft} requests, ${toolsLeft} tool calls ` +
      `and ${secondsLeft}s left. Stop exploring. If your fix is in place, run the tests once and call finish ` +
      `with your summary now; otherwise call finish and say what you found and what remains.`
    );
  }

  snapshot(): Record<string, unknown> {
    return {
      tokens: { ...this.tokens },
      cost_usd: this.costUsd,
      ...(this.estimated ? { estimated: true } : {}),
      requests: this.requests,
      tool_calls: this.toolCalls,
      elapsed_ms: this.elapsedMs(),
      limits: { ...this.limits },
    };
  }
}
