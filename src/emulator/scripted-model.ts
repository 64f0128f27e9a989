import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { cachedPrefixTokens, estimateTokens, promptText } from '../agent/tokens.js';

/**
 * A real HTTP server speaking the chat-completions protocol (non-streaming) that replays a script of
 * replies and records every request. Used by tests, the benchmark and `--model scripted:<file>`.
 *
 * Usage numbers are computed from what was actually sent (prompt ≈ request characters / 4), so a
 * smaller context shows up as fewer prompt tokens, and `cached_tokens` is the prefix shared with the
 * previous completion request, counted as OpenAI counts it (src/agent/tokens.ts). When the script runs out the server answers
 * 400 `script_exhausted`: a run that outlives its script is a bug in the script or the loop, not a finish.
 */
const ToolCallStep = z.strictObject({
  name: z.string().min(1),
  /** An object is sent as JSON; a string is sent verbatim (so malformed JSON can be scripted). */
  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).default({}),
  id: z.string().min(1).optional(),
});

const UsageOverride = z.strictObject({
  prompt_tokens: z.number().int().min(0).optional(),
  completion_tokens: z.number().int().min(0).optional(),
  cached_tokens: z.number().int().min(0).optional(),
});

export const ScriptStepSchema = z.union([
  z.strictObject({
    content: z.string().optional(),
    tool_calls: z.array(ToolCallStep).default([]),
    usage: UsageOverride.optional(),
    /** Answer without `usage`, as some OpenAI-compatible services do. */
    no_usage: z.boolean().optional(),
    /** Delay before answering (lets tests cancel while a request is in flight). */
    delay_ms: z.number().int().min(0).optional(),
    /** Send half of the reply's body, then drop the connection (a provider cut off mid-answer). */
    cut: z.boolean().optional(),
  }),
  z.strictObject({
    status: z.number().int().min(400).max(599),
    body: z.unknown().optional(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
]);
export type ScriptStep = z.input<typeof ScriptStepSchema>;

const ScriptFileSchema = z.union([
  z.array(ScriptStepSchema),
  z.strictObject({ model: z.string().min(1).optional(), steps: z.array(ScriptStepSchema) }),
]);

export interface ScriptFile {
  model?: string;
  steps: ScriptStep[];
}

/** Reads a script file (a JSON array of steps, or `{model?, steps}`), with errors naming the bad step. */
export function loadScript(file: string): ScriptFile {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read script ${file}: ${(err as Error).message}`);
  }
  const parsed = ScriptFileSchema.safeParse(json);
  if (!parsed.success) throw new Error(`invalid script ${file}:\n${z.prettifyError(parsed.error)}`);
  return Array.isArray(parsed.data) ? { steps: parsed.data } : parsed.data;
}

/** A trajectory of tool calls followed by `finish` (e.g. for the demo). */
export function scriptFromToolCalls(
  calls: { name: string; arguments: unknown }[],
  finishSummary: string,
): ScriptStep[] {
  return [
    ...calls.map((c) => ({
      tool_calls: [{ name: c.name, arguments: c.arguments as Record<string, unknown> | string }],
    })),
    { tool_calls: [{ name: 'finish', arguments: { summary: finishSummary } }] },
  ];
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** Prompt tokens this request was charged (0 for non-completion requests). */
  prompt_tokens: number;
  /** Of those, the tokens served from the prompt cache. */
  cached_tokens: number;
}

export interface ScriptedModelServer {
  /** Base URL for the openai SDK (ends in /v1). */
  url: string;
  requests: RecordedRequest[];
  /** Steps not yet replayed (of the one shared script; not per conversation). */
  remaining(): number;
  close(): Promise<void>;
}

export interface ScriptedServerOptions {
  /** The model name reported in replies (default `scripted-model`). */
  model?: string;
  /** Called as each completion request arrives (index from 0); the answer waits for it. */
  onRequest?: (index: number, body: unknown) => void | Promise<void>;
  /**
   * Each conversation (told apart by its first two messages: the system prompt and the task) replays
   * the script from its start, so runs served at once (many workers) each get the whole script.
   */
  perConversation?: boolean;
  /**
   * Scripts handed out in turn to conversations as they start (a request with no tool call replied in
   * it), however many run at once with the same prompt (the attempts of one run); a conversation is
   * told by its replies' tool-call ids, which carry its number. The `script` argument is then unused.
   */
  instances?: ScriptStep[][];
  /** Where to listen (default 127.0.0.1, any free port); the address is also the URL's host. */
  host?: string;
  port?: number;
}

/** The `instances` conversation a request continues (from its replies' tool-call ids), or null: a new one. */
function instanceOf(messages: unknown): number | null {
  for (const m of Array.isArray(messages) ? (messages as { tool_calls?: { id?: unknown }[] }[]) : []) {
    const id = m?.tool_calls?.[0]?.id;
    const found = typeof id === 'string' ? /^call_c(\d+)_/.exec(id) : null;
    if (found) return Number(found[1]);
  }
  return null;
}

export async function startScriptedModelServer(
  script: ScriptStep[],
  opts: ScriptedServerOptions = {},
): Promise<ScriptedModelServer> {
  const parse = (script: ScriptStep[]) =>
    script.map((s, i) => {
      const parsed = ScriptStepSchema.safeParse(s);
      if (!parsed.success) throw new Error(`invalid script step ${i}: ${z.prettifyError(parsed.error)}`);
      return parsed.data;
    });
  const steps = parse(script);
  const instances = opts.instances?.map(parse);
  let started = 0; // conversations given a script of `instances`
  const served = opts.model ?? 'scripted-model';
  const requests: RecordedRequest[] = [];
  const cursors = new Map<string, number>(); // next step, by conversation
  let completions = 0;
  let previousPrompt: string | null = null;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      return send(res, 400, {
        error: { message: 'request body is not JSON', type: 'invalid_request_error' },
      });
    }
    const path = (req.url ?? '').split('?')[0]!;
    const isCompletion = req.method === 'POST' && path === '/v1/chat/completions';
    const b = body as { messages?: unknown; tools?: unknown } | null;
    const prompt = isCompletion ? promptText(b?.messages, b?.tools) : '';
    const promptTokens = isCompletion ? estimateTokens(prompt) : 0;
    const cachedTokens = isCompletion ? cachedPrefixTokens(previousPrompt, prompt) : 0;
    if (isCompletion) previousPrompt = prompt;
    requests.push({
      method: req.method ?? '',
      path,
      headers: req.headers,
      body,
      prompt_tokens: promptTokens,
      cached_tokens: cachedTokens,
    });

    if (req.method === 'GET' && path === '/v1/models') {
      return send(res, 200, {
        object: 'list',
        data: [{ id: served, object: 'model', created: 0, owned_by: 'agenticfix' }],
      });
    }
    if (!isCompletion) return send(res, 404, { error: { message: `no route ${req.method} ${path}` } });
    await opts.onRequest?.(completions++, body);
    const instance = instances ? (instanceOf(b?.messages) ?? started++) : null;
    const mine = instance === null ? steps : instances![instance % instances!.length]!;
    const conversation =
      instance !== null
        ? `instance ${instance}`
        : opts.perConversation
          ? JSON.stringify((b?.messages as unknown[] | undefined)?.slice(0, 2) ?? null)
          : '';
    const next = (cursors.get(conversation) ?? 0) + 1;
    const step = mine[next - 1];
    if (!step) {
      return send(res, 400, {
        error: { message: `script exhausted after ${mine.length} steps`, type: 'script_exhausted' },
      });
    }
    cursors.set(conversation, next);
    if ('status' in step)
      return send(
        res,
        step.status,
        step.body ?? { error: { message: `scripted ${step.status}` } },
        step.headers,
      );
    if (step.delay_ms) await delay(step.delay_ms, res);
    const tool_calls = step.tool_calls.map((c, i) => ({
      id: c.id ?? `call_${instance === null ? '' : `c${instance}_`}${next}_${i}`,
      type: 'function' as const,
      function: {
        name: c.name,
        arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
      },
    }));
    const message = {
      role: 'assistant',
      content: step.content ?? null,
      ...(tool_calls.length ? { tool_calls } : {}),
    };
    const charged = step.usage?.prompt_tokens ?? promptTokens;
    const completion = step.usage?.completion_tokens ?? estimateTokens(JSON.stringify(message));
    send(
      res,
      200,
      {
        id: `chatcmpl-${next}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: served,
        choices: [
          { index: 0, message, finish_reason: tool_calls.length ? 'tool_calls' : 'stop', logprobs: null },
        ],
        ...(step.no_usage
          ? {}
          : {
              usage: {
                prompt_tokens: charged,
                completion_tokens: completion,
                total_tokens: charged + completion,
                prompt_tokens_details: { cached_tokens: step.usage?.cached_tokens ?? cachedTokens },
              },
            }),
      },
      {},
      step.cut,
    );
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => send(res, 500, { error: { message: err.message } }));
  });
  // Idle connections outlive the clients' own idle timeout (undici: 4 s), as real APIs' do: with Node's
  // 5 s a loaded machine let the server close a connection just as a client reused it (ECONNRESET).
  server.keepAliveTimeout = 65_000;
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/v1`,
    requests,
    remaining: () => steps.length - (cursors.get('') ?? 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Waits, but not for a client that already hung up (a cancelled request). */
function delay(ms: number, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    res.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** `cut`: the whole length is announced, half the body is sent, then the connection drops. */
function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  cut = false,
): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  if (!cut) return void res.end(text);
  res.write(text.slice(0, Math.floor(text.length / 2)), () => res.destroy());
}
