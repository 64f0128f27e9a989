import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import {
  loadScript,
  scriptFromToolCalls,
  startScriptedModelServer,
  type ScriptedModelServer,
} from '../../../src/emulator/scripted-model.js';

let server: ScriptedModelServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

const client = (url: string) => new OpenAI({ baseURL: url, apiKey: 'test', maxRetries: 0 });
const ask = (c: OpenAI, content: string) =>
  c.chat.completions.create({ model: 'requested', messages: [{ role: 'user', content }] });

describe('scripted chat-completions server', () => {
  it('replays tool calls (object or raw arguments) with usage computed from the request, and records requests', async () => {
    server = await startScriptedModelServer(
      [
        { content: 'thinking', tool_calls: [{ name: 'read_file', arguments: { path: 'a.js' } }] },
        { tool_calls: [{ name: 'read_file', arguments: '{"path": ', id: 'raw-1' }] },
      ],
      { model: 'served-model' },
    );
    const c = client(server.url);
    const first = await ask(c, 'short');
    expect(first.model).toBe('served-model');
    expect(first.choices[0]!.message.content).toBe('thinking');
    const tc = first.choices[0]!.message.tool_calls![0]!;
    expect(tc.type === 'function' && JSON.parse(tc.function.arguments)).toEqual({ path: 'a.js' });
    const second = await ask(c, 'x'.repeat(4000));
    const raw = second.choices[0]!.message.tool_calls![0]!;
    expect(raw.id).toBe('raw-1');
    expect(raw.type === 'function' && raw.function.arguments).toBe('{"path": ');
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens + 900);
    expect(second.usage!.total_tokens).toBe(second.usage!.prompt_tokens + second.usage!.completion_tokens);
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]!.body).toMatchObject({ model: 'requested', messages: [{ role: 'user' }] });
    expect(server.remaining()).toBe(0);

    const models = await c.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['served-model']);
  });

  // Issue 41: the attempts of one run ask with the same prompt at once; each must get a script of its own.
  it('instances: conversations started with the same prompt each get the next script, continued by their tool-call ids', async () => {
    const script = (k: number) => [
      { tool_calls: [{ name: 'read_file', arguments: { path: `${k}-1` } }] },
      { tool_calls: [{ name: 'read_file', arguments: { path: `${k}-2` } }] },
    ];
    server = await startScriptedModelServer([], { instances: [script(1), script(2)] });
    const c = client(server.url);
    const start = () => ask(c, 'the same task');
    const [a, b] = [await start(), await start()];
    const pathOf = (r: Awaited<ReturnType<typeof start>>) => {
      const call = r.choices[0]!.message.tool_calls![0]!;
      return call.type === 'function' ? (JSON.parse(call.function.arguments) as { path: string }).path : '';
    };
    expect([pathOf(a), pathOf(b)]).toEqual(['1-1', '2-1']);
    const next = (r: Awaited<ReturnType<typeof start>>) =>
      c.chat.completions.create({
        model: 'm',
        messages: [
          { role: 'user', content: 'the same task' },
          r.choices[0]!.message as OpenAI.ChatCompletionMessageParam,
          { role: 'tool', tool_call_id: r.choices[0]!.message.tool_calls![0]!.id, content: 'ok' },
        ],
      });
    // The second conversation continues first: each still gets its own script's next step.
    expect(pathOf(await next(b))).toBe('2-2');
    expect(pathOf(await next(a))).toBe('1-2');
  });

  it('reports the prefix shared with the previous request as cached_tokens, as OpenAI counts it', async () => {
    server = await startScriptedModelServer(Array.from({ length: 4 }, () => ({ content: 'ok' })));
    const c = client(server.url);
    const chat = (...contents: string[]) =>
      c.chat.completions.create({
        model: 'm',
        messages: contents.map((content) => ({ role: 'user' as const, content })),
      });
    const history = 'h'.repeat(4 * 3000); // about 3,000 tokens
    const first = await chat(history);
    expect(first.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    // The same history plus a new message: the shared prefix, rounded down to 128-token steps.
    const second = await chat(history, 'next');
    const cached = second.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached % 128).toBe(0);
    expect(cached).toBeGreaterThan(3000 - 128);
    expect(cached).toBeLessThanOrEqual(3000 + 128);
    expect(server.requests[1]!.cached_tokens).toBe(cached);
    // A change at the start of the prompt breaks the prefix.
    const third = await chat('x' + history.slice(1), 'next');
    expect(third.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    // Under 1,024 shared tokens nothing is cached.
    const fourth = await chat('x' + 'h'.repeat(4 * 900) + 'y'.repeat(8000));
    expect(fourth.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
  });

  it('replays HTTP errors and answers 400 once the script is exhausted', async () => {
    server = await startScriptedModelServer([{ status: 503, body: { error: { message: 'busy' } } }]);
    const c = client(server.url);
    await expect(ask(c, 'a')).rejects.toMatchObject({ status: 503, message: expect.stringMatching(/busy/) });
    await expect(ask(c, 'b')).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/script exhausted after 1 steps/),
    });
  });

  it('validates scripts, from code and from files', async () => {
    await expect(
      startScriptedModelServer([{ tool_calls: [{ name: 'x', bogus: 1 }] } as never]),
    ).rejects.toThrow(/invalid script step 0/);
    const dir = mkdtempSync(path.join(tmpdir(), 'script-'));
    const good = path.join(dir, 'good.json');
    writeFileSync(
      good,
      JSON.stringify({
        model: 'm',
        steps: scriptFromToolCalls([{ name: 'run_tests', arguments: {} }], 'done'),
      }),
    );
    expect(loadScript(good)).toEqual({
      model: 'm',
      steps: [
        { tool_calls: [{ name: 'run_tests', arguments: {} }] },
        { tool_calls: [{ name: 'finish', arguments: { summary: 'done' } }] },
      ],
    });
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ status: 200 }]));
    expect(() => loadScript(bad)).toThrow(/invalid script/);
    writeFileSync(bad, '{');
    expect(() => loadScript(bad)).toThrow(/cannot read script/);
  });
});
