import { createInterface, type Interface } from 'node:readline';
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { z } from 'zod';
import type { ToolSchema } from '../tools/types.js';
import { backoffMs, failureMessage, isTransient, retryAfterMs, type RetryInfo } from './retry.js';
import { tokensOfChars } from './tokens.js';

/** A tool call exactly as the model sent it: `arguments` is raw text that may not even be JSON. */
const RawToolCallSchema = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type RawToolCall = z.infer<typeof RawToolCallSchema>;

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: RawToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

const UsageSchema = z.object({
  prompt_tokens: z.number().int().min(0),
  completion_tokens: z.number().int().min(0),
  total_tokens: z.number().int().min(0).optional(),
  prompt_tokens_details: z.object({ cached_tokens: z.number().int().min(0).nullish() }).nullish(),
});

/** The part of a chat-completions response the loop relies on; anything else is ignored. */
const CompletionSchema = z.object({
  model: z.string(),
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          tool_calls: z.array(RawToolCallSchema).nullish(),
        }),
      }),
    )
    .min(1),
  usage: UsageSchema.nullish(),
});

export interface Usage {
  prompt: number;
  completion: number;
  cached: number;
  total: number;
  /** The service sent no usage: the tokens are estimated from the sizes of the request and the reply. */
  estimated?: true;
}

export interface ModelReply {
  message: { content: string | null; tool_calls: RawToolCall[] };
  usage: Usage;
  /** The model name the service says served the request. */
  model: string;
}

export interface ModelClient {
  complete(messages: ChatMessage[], tools: ToolSchema[], signal?: AbortSignal): Promise<ModelReply>;
}

/** The service failed for good (non-transient error, exhausted retries, or an invalid reply). */
export class ModelError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

/** The run was cancelled (abort signal, or the human closed the input). */
export class ModelCancelled extends Error {}

export interface OpenAIChatModelOptions {
  baseUrl: string;
  apiKey: string;
  name: string;
  timeoutMs: number;
  maxRetries: number;
  retryBaseMs: number;
  /** A reply larger than this is refused (ModelError) before it is parsed. */
  maxReplyBytes: number;
  onRetry?: (info: RetryInfo) => void;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new ModelCancelled('cancelled'));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new ModelCancelled('cancelled'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Any OpenAI-compatible chat-completions endpoint through the openai SDK. The SDK's own retries are off so
 * that every retry is bounded, jittered and reported (onRetry → trace) by this class.
 */
export class OpenAIChatModel implements ModelClient {
  private readonly client: OpenAI;
  /** The sizes of the last request and its reply, in characters: what a reply without usage is charged by. */
  private readonly sizes = { request: 0, reply: 0 };

  constructor(private readonly opts: OpenAIChatModelOptions) {
    this.client = new OpenAI({
      baseURL: opts.baseUrl,
      apiKey: opts.apiKey,
      timeout: opts.timeoutMs,
      maxRetries: 0,
      fetch: cappedFetch(opts.maxReplyBytes, this.sizes),
    });
  }

  async complete(messages: ChatMessage[], tools: ToolSchema[], signal?: AbortSignal): Promise<ModelReply> {
    for (let attempt = 0; ; attempt++) {
      // The SDK never removes its abort listener: give it a per-request signal so the run's does not pile them up.
      const request = new AbortController();
      const relay = () => request.abort();
      if (signal?.aborted) relay();
      signal?.addEventListener('abort', relay, { once: true });
      try {
        const raw = await this.client.chat.completions.create(
          { model: this.opts.name, messages: messages as OpenAI.ChatCompletionMessageParam[], tools },
          { signal: request.signal },
        );
        return toReply(raw, this.sizes);
      } catch (err) {
        if (err instanceof APIUserAbortError || signal?.aborted) throw new ModelCancelled('cancelled');
        if (err instanceof ModelError) throw err;
        // The SDK wraps what its fetch throws: a reply over the cap is no connection failure to retry.
        if (err instanceof APIConnectionError && err.cause instanceof ModelError) throw err.cause;
        const status = err instanceof APIError ? (err.status ?? null) : null;
        const message = failureMessage(err);
        if (!isTransient(err) || attempt >= this.opts.maxRetries) {
          throw new ModelError(attempt > 0 ? `${message} (after ${attempt} retries)` : message, status);
        }
        const delay = retryAfterMs(err, this.opts.retryBaseMs) ?? backoffMs(attempt, this.opts.retryBaseMs);
        this.opts.onRetry?.({ attempt: attempt + 1, delay_ms: delay, status, error: message });
        await sleep(delay, signal);
      } finally {
        signal?.removeEventListener('abort', relay);
      }
    }
  }
}

/**
 * fetch that reads a reply only up to `maxBytes` (a longer one is a ModelError, nothing of it parsed)
 * and notes the sizes of the request and the reply as text.
 */
function cappedFetch(maxBytes: number, sizes: { request: number; reply: number }): typeof fetch {
  const tooLarge = () =>
    new ModelError(
      `the model's reply is over ${maxBytes} bytes (AGENTICFIX_MODEL_MAX_REPLY_MB): refused unread`,
    );
  return async (input, init) => {
    sizes.request = typeof init?.body === 'string' ? init.body.length : 0;
    const res = await fetch(input, init);
    if (Number(res.headers.get('content-length')) > maxBytes) {
      await res.body?.cancel();
      throw tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let bytes = 0;
    for await (const chunk of res.body ?? []) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        await res.body?.cancel();
        throw tooLarge();
      }
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    sizes.reply = body.toString('utf8').length;
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function toReply(raw: unknown, sizes: { request: number; reply: number }): ModelReply {
  const parsed = CompletionSchema.safeParse(raw);
  if (!parsed.success) throw new ModelError(`invalid reply from the model service: ${parsed.error.message}`);
  const { model, choices, usage } = parsed.data;
  const message = choices[0]!.message;
  return {
    message: { content: message.content ?? null, tool_calls: message.tool_calls ?? [] },
    usage: usage ? usageOf(usage) : estimatedUsage(sizes),
    model,
  };
}

function usageOf(u: z.infer<typeof UsageSchema>): Usage {
  return {
    prompt: u.prompt_tokens,
    completion: u.completion_tokens,
    cached: u.prompt_tokens_details?.cached_tokens ?? 0,
    total: u.total_tokens ?? u.prompt_tokens + u.completion_tokens,
  };
}

/**
 * A reply without usage is never free: the request and the reply as sent are counted at four
 * characters a token (an overestimate for the reply's JSON framing: the budget errs on the safe side).
 */
function estimatedUsage(sizes: { request: number; reply: number }): Usage {
  const prompt = tokensOfChars(sizes.request);
  const completion = tokensOfChars(sizes.reply);
  return { prompt, completion, cached: 0, total: prompt + completion, estimated: true };
}

const HEREDOCS = /((?:\s*<<[A-Za-z_]\w*)+)\s*$/;

/**
 * A person (or another program) in the model's seat: each `tool_name {json}` is one tool call; the
 * observations are printed back. `help` / `help <tool>` show descriptions and JSON Schemas. JSON may
 * continue on the following lines until it parses (a blank line sends it as it is); `<<NAME` at the
 * end of the call reads the lines up to a line `NAME` as one string field (the field NAME, or else the
 * first missing string field), so long text needs no escaping. Works with a pipe: lines are read as
 * they come, EOF cancels the run.
 */
export class HumanModel implements ModelClient {
  private readonly rl: Interface;
  private readonly lines: AsyncIterator<string>;
  private calls = 0;

  constructor(
    input: NodeJS.ReadableStream,
    private readonly output: NodeJS.WritableStream,
  ) {
    this.rl = createInterface({ input, terminal: false });
    this.lines = this.rl[Symbol.asyncIterator]();
  }

  /** Stops reading the input, so the process can exit once the run is over. */
  close(): void {
    this.rl.close();
  }

  async complete(messages: ChatMessage[], tools: ToolSchema[], signal?: AbortSignal): Promise<ModelReply> {
    if (this.calls === 0) {
      this.output.write(`Tools: ${tools.map((t) => t.function.name).join(', ')}\n`);
      this.output.write(
        'Type one call: tool_name {"arg": "value"} (JSON may span lines; end with <<EOF to type a long ' +
          'string field up to a line EOF). help [tool] describes the tools. finish {"summary": "..."} ends.\n',
      );
    }
    // Everything the model would see since its last action: observations, warnings, state.
    const lastAssistant = messages.map((m) => m.role).lastIndexOf('assistant');
    for (const m of messages.slice(lastAssistant + 1))
      if (m.role !== 'system') this.output.write(`\n[${m.role}] ${m.content}\n`);
    for (;;) {
      this.output.write('\nagenticfix> ');
      const line = (await this.nextLine(signal)).trim();
      if (!line) continue;
      const m = /^(\S+)\s*([\s\S]*)$/.exec(line)!;
      const name = m[1]!;
      if (name === 'help') {
        this.output.write(helpText(tools, m[2]!.trim()));
        continue;
      }
      const args = await this.readArguments(name, m[2]!, tools, signal);
      if (args === null) continue;
      const call: RawToolCall = {
        id: `human-${++this.calls}`,
        type: 'function',
        function: { name, arguments: args },
      };
      return {
        message: { content: null, tool_calls: [call] },
        usage: { prompt: 0, completion: 0, cached: 0, total: 0 },
        model: 'human',
      };
    }
  }

  private async nextLine(signal?: AbortSignal): Promise<string> {
    if (signal?.aborted) throw new ModelCancelled('cancelled');
    const next = await this.lines.next();
    if (next.done) throw new ModelCancelled('input closed');
    return next.value;
  }

  /** The call's arguments as JSON text, or null (with a message printed) when they cannot be completed. */
  private async readArguments(
    name: string,
    rest: string,
    tools: ToolSchema[],
    signal?: AbortSignal,
  ): Promise<string | null> {
    const heredocs = HEREDOCS.exec(rest);
    const markers = heredocs ? [...heredocs[1]!.matchAll(/<<(\w+)/g)].map((x) => x[1]!) : [];
    let text = (heredocs ? rest.slice(0, heredocs.index) : rest).trim() || '{}';
    while (!markers.length && !parses(text)) {
      this.output.write('... ');
      const more = await this.nextLine(signal);
      if (!more.trim()) return text; // sent as it is: the parse error comes back as the observation
      text += `\n${more}`;
    }
    if (!markers.length) return text;
    // All bodies are read first: even a refused call must not run its text as commands.
    const bodies: string[] = [];
    for (const marker of markers) {
      const body: string[] = [];
      for (let l = await this.nextLine(signal); l !== marker; l = await this.nextLine(signal)) body.push(l);
      bodies.push(body.map((l) => `${l}\n`).join(''));
    }
    const args: unknown = parses(text) ? JSON.parse(text) : null;
    if (!args || typeof args !== 'object' || Array.isArray(args)) {
      this.output.write('Before <<NAME the arguments must be one complete JSON object.\n');
      return null;
    }
    const obj = args as Record<string, unknown>;
    const schema = tools.find((t) => t.function.name === name)?.function.parameters;
    for (const [i, marker] of markers.entries()) {
      const field = stringFields(schema).includes(marker) ? marker : missingStringField(schema, obj);
      if (!field) {
        this.output.write(`${name} has no string field left for <<${marker}.\n`);
        return null;
      }
      obj[field] = bodies[i];
    }
    return JSON.stringify(obj);
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

type JsonSchema = { properties?: Record<string, { type?: unknown }>; required?: string[] } | undefined;

function stringFields(schema: JsonSchema): string[] {
  return Object.entries(schema?.properties ?? {})
    .filter(([, p]) => p.type === 'string')
    .map(([k]) => k);
}

/** The first required string field not given yet, else the first optional one. */
function missingStringField(schema: JsonSchema, given: Record<string, unknown>): string | undefined {
  const open = stringFields(schema).filter((f) => !(f in given));
  return open.find((f) => schema?.required?.includes(f)) ?? open[0];
}

/** `help`: every tool with its description; `help <tool>`: its description and JSON Schema. */
function helpText(tools: ToolSchema[], name: string): string {
  if (!name) return tools.map((t) => `${t.function.name}: ${t.function.description}\n`).join('');
  const tool = tools.find((t) => t.function.name === name);
  if (!tool) return `No tool "${name}"; tools: ${tools.map((t) => t.function.name).join(', ')}\n`;
  return `${tool.function.description}\n${JSON.stringify(tool.function.parameters, null, 2)}\n`;
}
