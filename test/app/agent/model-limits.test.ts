import { readFileSync, rmSync, statSync } from 'node:fs';
import { Budget } from '../../../src/agent/budget.js';
import { ModelError, OpenAIChatModel, type ChatMessage } from '../../../src/agent/model.js';
import { startScriptedModelServer, type ScriptStep } from '../../../src/emulator/scripted-model.js';
import { renderStatus } from '../../../src/publish/status.js';
import { RunTrace } from '../../../src/trace/trace.js';
import { tempDir } from '../../support/app.js';

/**
 * Issue 35, items 5 and 6: a reply without `usage` is never free (it is charged an estimate, marked as
 * such), a reply over the size cap is refused before it is parsed, and a huge tool argument is not
 * copied whole into the trace.
 */

const MiB = 1024 * 1024;
const PRICE = { input: 2, cached_input: 0.5, output: 8 };

async function modelOn(steps: ScriptStep[], maxReplyBytes = 16 * MiB) {
  const server = await startScriptedModelServer(steps);
  const retries: unknown[] = [];
  const model = new OpenAIChatModel({
    baseUrl: server.url,
    apiKey: 'scripted',
    name: 'scripted',
    timeoutMs: 30_000,
    maxRetries: 2,
    retryBaseMs: 1,
    maxReplyBytes,
    onRetry: (r) => retries.push(r),
  });
  return { model, server, retries };
}

describe('a model reply without usage (item 5)', () => {
  it('under a $0.05 limit is charged an estimate from the sizes, so the run stops at cost_budget, not after 60 free requests', async () => {
    const step: ScriptStep = { content: 'thinking', no_usage: true };
    const { model, server } = await modelOn(Array.from({ length: 60 }, () => step));
    // A prompt of 40,000 characters: about 10,000 tokens, $0.02 at $2 per million.
    const messages: ChatMessage[] = [{ role: 'user', content: 'x'.repeat(40_000) }];
    const budget = new Budget(
      { tokens: 10_000_000, requests: 60, toolCalls: 100, timeMs: 600_000, tokenReserve: 0, costUsd: 0.05 },
      { price: PRICE },
    );
    const usages = [];
    while (!budget.exhausted()) {
      const reply = await model.complete(messages, []);
      usages.push(reply.usage);
      budget.addRequest(reply.usage);
    }
    await server.close();
    expect(budget.exhausted()).toBe('cost_budget');
    expect(budget.requests).toBe(3);
    expect(usages[0]).toMatchObject({ estimated: true, cached: 0 });
    expect(usages[0]!.prompt).toBeGreaterThanOrEqual(10_000);
    expect(usages[0]!.completion).toBeGreaterThan(0);
    expect(budget.snapshot()).toMatchObject({ estimated: true });
  });

  it('a reply with usage is counted as the service says, not estimated', async () => {
    const { model, server } = await modelOn([
      { content: 'ok', usage: { prompt_tokens: 7, completion_tokens: 3 } },
    ]);
    const reply = await model.complete([{ role: 'user', content: 'hi' }], []);
    await server.close();
    expect(reply.usage).toEqual({ prompt: 7, completion: 3, cached: 0, total: 10 });
  });

  it('the status comment says the tokens and the cost are estimated', () => {
    const status = renderStatus('r-1', 'b'.repeat(40), {
      phase: 'working',
      step: 3,
      tokensUsed: 30_000,
      tokenBudget: 150_000,
      costUsd: 0.06,
      costBudget: 0.05,
      estimated: true,
    });
    expect(status).toMatch(/30000 of 150000 tokens, \$0\.0600 of \$0\.0500 \(estimated[^)]*\)/);
  });
});

describe('bounded model replies and traces (item 6)', () => {
  it('a reply over the size cap is refused as a model error before it is parsed, and not retried', async () => {
    const { model, server, retries } = await modelOn([{ content: 'y'.repeat(2 * MiB) }], MiB);
    const refused = await model.complete([{ role: 'user', content: 'hi' }], []).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ModelError);
    expect((refused as Error).message).toMatch(/over 1048576 bytes/);
    expect(retries).toEqual([]);
    await server.close();
  });

  it('a 100 MB tool argument is not copied whole into events.jsonl: each event keeps its ends and says what was cut', () => {
    const dir = tempDir('trace-cap-');
    const trace = new RunTrace('r-big', dir);
    const huge = 'A'.repeat(100 * MiB);
    const call = { id: 'c1', type: 'function', function: { name: 'write_file', arguments: huge } };
    trace.event('model_reply', { model: 'm', tool_calls: [call] });
    trace.event('malformed_call', { tool: 'write_file', arguments: huge });
    trace.event('tool_start', { name: 'write_file', args: { path: 'a', content: huge } });
    const bytes = statSync(trace.eventsPath).size;
    expect(bytes).toBeLessThan(MiB);
    const text = readFileSync(trace.eventsPath, 'utf8');
    expect(text).toContain(`[... ${100 * MiB - 2 * 32 * 1024} characters left out ...]`);
    rmSync(dir, { recursive: true, force: true });
  });
});
