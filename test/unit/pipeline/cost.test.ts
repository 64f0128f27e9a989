import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Budget } from '../../../src/agent/budget.js';
import { requestCostUsd } from '../../../src/agent/tokens.js';
import { ConfigError, loadConfig } from '../../../src/config/config.js';
import { BUILTIN_PRICES, usd } from '../../../src/config/prices.js';
import { withPricesTable } from '../../../src/config/settings-doc.js';
import { costRefusal, modelPrice } from '../../../src/pipeline/pricing.js';
import { renderStatus } from '../../../src/publish/status.js';
import { revisionsSection, traceComment } from '../../../src/publish/render.js';
import type { RepairResult } from '../../../src/agent/types.js';
import type { RunRecord } from '../../../src/store/store.js';

const PRICE = { input: 2, cached_input: 0.5, output: 8 };

describe('the cost of a model request', () => {
  it('prices cached input at its own rate: uncached, cached and output tokens each at theirs', () => {
    // 2,000 uncached × $2 + 8,000 cached × $0.50 + 1,000 output × $8, per million.
    expect(requestCostUsd(PRICE, { prompt: 10_000, cached: 8_000, completion: 1_000 })).toBeCloseTo(
      0.016,
      12,
    );
    // The same request without a cache hit costs more.
    expect(requestCostUsd(PRICE, { prompt: 10_000, cached: 0, completion: 1_000 })).toBeCloseTo(0.028, 12);
    // A service reporting more cached than prompt tokens is not paid for negative uncached input.
    expect(requestCostUsd(PRICE, { prompt: 100, cached: 500, completion: 0 })).toBeCloseTo(0.00005, 12);
  });

  it('is written in dollars with four decimals below one, and "unknown" when there is no price', () => {
    expect(usd(0.016)).toBe('$0.0160');
    expect(usd(12.345)).toBe('$12.35');
    expect(usd(0)).toBe('$0.0000');
    expect(usd(null)).toBe('unknown');
  });
});

describe('the budget counts cost', () => {
  const limits = {
    tokens: 1_000_000,
    requests: 100,
    toolCalls: 100,
    timeMs: 600_000,
    tokenReserve: 0,
    costUsd: 0.05,
  };
  const request = { prompt: 10_000, completion: 1_000, cached: 8_000, total: 11_000 };

  it('adds each request, warns in the last tenth and stops at the limit as cost_budget', () => {
    const b = new Budget(limits, { price: PRICE });
    expect(b.costUsd).toBe(0);
    expect(b.addRequest(request)).toBeCloseTo(0.016, 12);
    b.addRequest(request);
    expect(b.exhausted()).toBeNull();
    expect(b.left().cost_usd).toBeCloseTo(0.018, 12);
    expect(b.wrapUpWarning()).toBeNull();
    b.addRequest(request); // $0.048: $0.002 left, within the last tenth
    expect(b.wrapUpWarning()).toMatch(
      /^Budget nearly spent: 967000 of 1000000 tokens, \$0\.0020 of \$0\.0500, /,
    );
    expect(b.exhausted()).toBeNull();
    b.addRequest(request);
    expect(b.costUsd).toBeCloseTo(0.064, 12);
    expect(b.exhausted()).toBe('cost_budget');
  });

  it('without a price the cost is unknown, never 0; with a cost limit nothing may be spent', () => {
    const free = new Budget({ ...limits, costUsd: null });
    expect(free.addRequest(request)).toBeNull();
    expect(free.costUsd).toBeNull();
    expect(free.exhausted()).toBeNull();
    expect(free.left()).not.toHaveProperty('cost_usd'); // the model is told no cost when there is no limit
    expect(new Budget(limits).exhausted()).toBe('cost_budget');
  });
});

describe('prices in the configuration', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(path.join(os.tmpdir(), 'agenticfix-prices-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("the built-in table, with the operator's entries over it (JSON or a file); no cost limit by default", () => {
    const plain = loadConfig({}, dir);
    expect(plain.model.prices['gpt-4.1']).toEqual(BUILTIN_PRICES['gpt-4.1']);
    expect(plain.budgets.costUsd).toBeNull();
    expect(plain.ceilings.costUsd).toBeNull();
    const inline = loadConfig(
      {
        AGENTICFIX_MODEL_PRICES: JSON.stringify({
          'gpt-4.1': { input: 1, cached_input: 0.25, output: 4 },
          'my-local': { input: 0, cached_input: 0, output: 0 },
        }),
        AGENTICFIX_MAX_COST_USD: '2.5',
      },
      dir,
    );
    expect(inline.model.prices['gpt-4.1']).toEqual({ input: 1, cached_input: 0.25, output: 4 });
    expect(inline.model.prices['my-local']).toEqual({ input: 0, cached_input: 0, output: 0 });
    expect(inline.model.prices['deepseek-chat']).toEqual(BUILTIN_PRICES['deepseek-chat']);
    expect(inline.budgets.costUsd).toBe(2.5);
    expect(inline.ceilings.costUsd).toBe(2.5);
    writeFileSync(path.join(dir, 'prices.json'), JSON.stringify({ m: PRICE }));
    expect(loadConfig({ AGENTICFIX_MODEL_PRICES: 'prices.json' }, dir).model.prices.m).toEqual(PRICE);
  });

  it('a wrong price stops the start-up naming the variable and what is wrong', () => {
    const bad = (value: string) => () => loadConfig({ AGENTICFIX_MODEL_PRICES: value }, dir);
    expect(bad('{"m": {"input": 1, "output": 2}}')).toThrow(
      /AGENTICFIX_MODEL_PRICES: m\.cached_input: .*expected number/,
    );
    expect(bad('{"m": {"input": 1, "cached": 0.1, "cached_input": 0.1, "output": 2}}')).toThrow(
      /AGENTICFIX_MODEL_PRICES: .*unrecognized key.*"cached"/i,
    );
    expect(bad('{"m": {"input": -1, "cached_input": 0, "output": 0}}')).toThrow(/m\.input/);
    expect(bad('{oops')).toThrow(/AGENTICFIX_MODEL_PRICES: not JSON/);
    expect(bad('missing.json')).toThrow(/AGENTICFIX_MODEL_PRICES: no JSON object and no such file/);
    expect(bad('{oops')).toThrow(ConfigError);
    expect(() => loadConfig({ AGENTICFIX_MAX_COST_USD: '0' }, dir)).toThrow(/AGENTICFIX_MAX_COST_USD/);
  });

  it('a model is priced by the name the run asks for; with a cost limit an unpriced one is refused', () => {
    const config = loadConfig({ AGENTICFIX_MODEL_PROVIDER: 'openai', AGENTICFIX_MODEL_API_KEY: 'k' }, dir);
    expect(modelPrice({ kind: 'openai' }, config.model)).toEqual({
      name: 'gpt-4.1',
      price: BUILTIN_PRICES['gpt-4.1'],
    });
    const url = { kind: 'url' as const, baseUrl: 'http://127.0.0.1:1/v1', name: 'my-finetune' };
    expect(modelPrice(url, config.model)).toEqual({ name: 'my-finetune', price: null });
    expect(costRefusal(url, config.model, null)).toBeNull();
    expect(costRefusal(url, config.model, 1.5)).toBe(
      'The run may spend at most 1.5 USD, and model `my-finetune` has no price to count it by: the operator can add one with AGENTICFIX_MODEL_PRICES.',
    );
    expect(costRefusal({ kind: 'openai' }, config.model, 1.5)).toBeNull();
    // Names that are properties of every object are no prices.
    expect(modelPrice({ ...url, name: 'constructor' }, config.model).price).toBeNull();
  });

  it("docs/configuration.md's table is the built-in one (node scripts/settings-doc.mjs)", () => {
    const readme = readFileSync(
      fileURLToPath(new URL('../../../docs/configuration.md', import.meta.url)),
      'utf8',
    );
    expect(withPricesTable(readme)).toBe(readme);
    expect(readme).toContain('| `gpt-4.1` | 2 | 0.5 | 8 |');
  });
});

describe('cost in the comments', () => {
  const run = {
    id: 'r1',
    base_commit: 'b'.repeat(40),
    triggered_by: 'alice',
    trigger: 'label',
    model: null,
  } as RunRecord;
  const result = {
    stop_reason: 'cost_budget',
    error: null,
    duration_ms: 1000,
    requests: 2,
    tool_calls: 1,
    tokens: { prompt: 20_000, completion: 2_000, cached: 16_000, total: 22_000 },
    cost_usd: 0.032,
    phases_ms: { agent: 1000 },
  } as unknown as RepairResult;
  const reply = (cost: number | null) =>
    JSON.stringify({
      type: 'model_reply',
      usage: { prompt: 10_000, completion: 1_000, cached: 8_000, total: 11_000 },
      cost_usd: cost,
    });

  it('the trace comment: the stop reason, the total at the price it was counted by, and each request', () => {
    const events = [JSON.stringify({ type: 'model', name: 'm', price: PRICE }), reply(0.016), reply(0.016)];
    const body = traceComment(run, result, events.join('\n'));
    expect(body).toContain('- Stop reason: `cost_budget`');
    expect(body).toContain('- Cost: $0.0320 at 2 input, 0.5 cached input, 8 output USD per million tokens');
    expect(body).toContain('| # | Prompt | Cached | Completion | Total | Cost |');
    expect(body).toContain('| 2 | 10000 | 8000 | 1000 | 11000 | $0.0160 |');
  });

  it('an unpriced model: "unknown", never $0', () => {
    const events = [JSON.stringify({ type: 'model', name: 'm', price: null }), reply(null)];
    const body = traceComment(run, { ...result, cost_usd: null }, events.join('\n'));
    expect(body).toContain(
      '- Cost: unknown (the model has no price: AGENTICFIX_MODEL_PRICES can give it one)',
    );
    expect(body).toContain('| 1 | 10000 | 8000 | 1000 | 11000 | unknown |');
    expect(body).not.toContain('$0.0000');
  });

  it('the status comment shows the cost next to the tokens, with the limit when there is one', () => {
    const working = { phase: 'working', step: 3, tokensUsed: 500, tokenBudget: 1000 } as const;
    expect(renderStatus('r1', 'b'.repeat(40), { ...working, costUsd: 0.0123, costBudget: 0.5 })).toContain(
      '- [ ] Working: step 3, 500 of 1000 tokens, $0.0123 of $0.5000 ⬅️',
    );
    expect(renderStatus('r1', 'b'.repeat(40), { ...working, costUsd: null, costBudget: null })).toContain(
      'step 3, 500 of 1000 tokens, cost unknown ⬅️',
    );
  });

  it("the pull request's list of revisions gives each one's cost", () => {
    const section = revisionsSection([
      { ...run, revision: 1, pushed_commit: 'c'.repeat(40), verdict: 'verified', cost_usd: 0.0042 },
      { ...run, id: 'r2', revision: 2, pushed_commit: 'd'.repeat(40), verdict: 'verified', cost_usd: null },
    ]);
    expect(section).toContain('| # | commit | asked for by | verdict | cost | run |');
    expect(section).toMatch(/\| 1 \| `c{12}` \| .* \| `verified` \| \$0\.0042 \| `r1` \|/);
    expect(section).toMatch(/\| 2 \| `d{12}` \| .* \| `verified` \| unknown \| `r2` \|/);
  });
});
