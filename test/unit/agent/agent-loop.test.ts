import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Budget } from '../../../src/agent/budget.js';
import { ContextManager } from '../../../src/agent/context.js';
import { runAgentLoop } from '../../../src/agent/loop.js';
import { ModelError, type ChatMessage, type ModelClient, type ModelReply } from '../../../src/agent/model.js';
import { loadConfig } from '../../../src/config/config.js';
import type { ModelPrice } from '../../../src/config/prices.js';
import { fail, ok, type ToolRegistry, type ToolResult } from '../../../src/tools/types.js';
import { RunTrace } from '../../../src/trace/trace.js';

/**
 * The loop in-process, like mini-swe-agent's deterministic model: a model that replays fixed replies
 * and records what it was sent, two small tools over a map of notes, and the real budget, context and
 * trace. What is asserted is the loop's own behaviour; the HTTP model path has its own tests.
 */
type Reply = { call: string; args?: unknown } | { text: string } | { throws: Error };

class ReplayModel implements ModelClient {
  readonly seen: ChatMessage[][] = [];
  private n = 0;
  constructor(private readonly replies: Reply[]) {}
  async complete(messages: ChatMessage[]): Promise<ModelReply> {
    this.seen.push(structuredClone(messages));
    const r = this.replies[this.n++];
    if (!r) throw new Error('the replay ran out: the loop asked once too often');
    if ('throws' in r) throw r.throws;
    const usage = { prompt: 100, completion: 10, cached: 0, total: 110 };
    if ('text' in r) return { model: 'replay', usage, message: { content: r.text, tool_calls: [] } };
    const id = `c${this.n}`;
    const call = {
      id,
      type: 'function' as const,
      function: { name: r.call, arguments: JSON.stringify(r.args ?? {}) },
    };
    return { model: 'replay', usage, message: { content: null, tool_calls: [call] } };
  }
}

function notesRegistry(): ToolRegistry & { notes: Map<string, string> } {
  const notes = new Map<string, string>();
  let edited = false;
  const run: Record<string, (a: Record<string, unknown>) => ToolResult> = {
    write_note: (a) => {
      if (typeof a.name !== 'string') return fail('invalid_arguments', '`name` is required');
      notes.set(a.name, String(a.text ?? ''));
      edited = true;
      return ok({ written: a.name });
    },
    read_note: (a) =>
      notes.has(String(a.name)) ? ok({ text: notes.get(String(a.name)) }) : fail('not_found', 'no such note'),
  };
  return {
    notes,
    context: {} as ToolRegistry['context'],
    names: () => Object.keys(run),
    mutates: (name) => name === 'write_note',
    schemas: () =>
      Object.keys(run).map((name) => ({
        type: 'function' as const,
        function: { name, description: name, parameters: { type: 'object', properties: {} } },
      })),
    call: async (name, args) => run[name]?.(args as Record<string, unknown>) ?? fail('unknown_tool', name),
    hasEdits: () => edited,
  };
}

describe('the agent loop in-process (a replaying model, real budget, context and trace)', () => {
  const config = loadConfig({});
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'agenticfix-loop-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function loop(
    replies: Reply[],
    budgets: Partial<typeof config.budgets> = {},
    price: ModelPrice | null = null,
  ) {
    const model = new ReplayModel(replies);
    const registry = notesRegistry();
    const trace = new RunTrace('loop', dir);
    const context = new ContextManager({ ...config.context, observationMaxChars: 2000 }, 'SYS', 'TASK');
    const outcome = await runAgentLoop({
      model,
      registry,
      context,
      budget: new Budget({ ...config.budgets, ...budgets }, { price }),
      agent: config.agent,
      trace,
    });
    const events = readFileSync(trace.eventsPath, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; cost_usd?: unknown });
    return { outcome, model, registry, events: events.map((e) => e.type), records: events };
  }

  it('runs each call, sends its observation back under the call id, and stops at finish', async () => {
    const { outcome, model, registry, events } = await loop([
      { call: 'write_note', args: { name: 'a', text: 'hello' } },
      { call: 'read_note', args: { name: 'a' } },
      { call: 'finish', args: { summary: 'wrote a' } },
    ]);
    expect(outcome).toMatchObject({ stop_reason: 'completed', summary: 'wrote a', model_name: 'replay' });
    expect(registry.notes.get('a')).toBe('hello');
    const third = model.seen[2]!;
    const answer = third.find((m) => m.role === 'tool' && m.tool_call_id === 'c2');
    expect(JSON.parse(String(answer!.content))).toMatchObject({ success: true, data: { text: 'hello' } });
    expect(events.filter((t) => t !== 'context_compacted')).toEqual([
      'model_reply',
      'model_reply',
      'model_reply',
      'stop',
    ]);
  });

  it('a bad call is an observation, not a crash; a reply without a call gets a note', async () => {
    const { outcome, model } = await loop([
      { call: 'read_note', args: { name: 'missing' } },
      { text: 'thinking' },
      { call: 'write_note', args: { name: 'b' } },
      { call: 'finish', args: { summary: 'ok' } },
    ]);
    expect(outcome.stop_reason).toBe('completed');
    const second = model.seen[1]!;
    expect(JSON.parse(String(second.at(-1)!.content))).toMatchObject({
      success: false,
      error_code: 'not_found',
    });
    expect(model.seen[2]!.at(-1)).toMatchObject({ role: 'user' });
  });

  it('a finish without any edit is sent back, then ends the run as no_edit_stop', async () => {
    const finish = { call: 'finish', args: { summary: 'nothing to do' } } as const;
    const { outcome, events } = await loop(
      Array.from({ length: config.agent.noEditNudges + 1 }, () => finish),
    );
    expect(outcome.stop_reason).toBe('no_edit_stop');
    expect(events.filter((t) => t === 'finish_rejected')).toHaveLength(config.agent.noEditNudges);
  });

  it('stops at the tool budget before running the call over it', async () => {
    const { outcome, registry } = await loop(
      [
        { call: 'write_note', args: { name: 'one' } },
        { call: 'write_note', args: { name: 'two' } },
      ],
      { toolCalls: 1 },
    );
    expect(outcome.stop_reason).toBe('tool_budget');
    expect([...registry.notes.keys()]).toEqual(['one']);
  });

  it('stops at the cost limit before the request over it, each reply traced with its cost', async () => {
    // 100 prompt tokens × $1000 + 10 output tokens × $2000 per million: $0.12 a request.
    const price = { input: 1000, cached_input: 100, output: 2000 };
    const notes = Array.from({ length: 5 }, (_, i) => ({ call: 'write_note', args: { name: `n${i}` } }));
    const { outcome, model, registry, records } = await loop(notes, { costUsd: 0.3 }, price);
    expect(outcome.stop_reason).toBe('cost_budget');
    expect(model.seen).toHaveLength(3); // $0.36 after three: the fourth is never asked for
    expect([...registry.notes.keys()]).toEqual(['n0', 'n1', 'n2']);
    const costs = records.filter((e) => e.type === 'model_reply').map((e) => e.cost_usd as number);
    expect(costs.map((c) => c.toFixed(6))).toEqual(['0.120000', '0.120000', '0.120000']);
    expect(records.at(-1)).toMatchObject({ type: 'stop', stop_reason: 'cost_budget' });
  });

  // Issue 37: a reply 10× the context was run (a half fix) and took the run to 1.5 M tokens of 150k.
  it('a reply larger than the token budget left is neither appended nor run: the run stops at token_budget', async () => {
    const { outcome, model, registry } = await loop(
      [
        { call: 'write_note', args: { name: 'huge', text: 'x'.repeat(40_000) } }, // ~10k tokens, counted as 10
        { call: 'finish', args: { summary: 'done' } },
      ],
      { tokens: 1000 },
    );
    expect(outcome.stop_reason).toBe('token_budget');
    expect(model.seen).toHaveLength(1);
    expect(registry.notes.size).toBe(0);
  });

  it("the model's failure ends the run as model_error with its message", async () => {
    const { outcome } = await loop([{ throws: new ModelError('401 invalid key', 401) }]);
    expect(outcome).toMatchObject({ stop_reason: 'model_error', error: '401 invalid key' });
  });
});
