import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

/**
 * What model requests cost: USD per million tokens of uncached input, cached input (served from the
 * provider's prompt cache) and output, per model name as the run asks for it. The built-in table holds
 * common hosted models; the operator's AGENTICFIX_MODEL_PRICES adds models and overrides entries. A
 * model in neither has no price: its cost is unknown (null), never 0.
 */
const usdPerMillion = z.number().finite().min(0);
export const PRICE_SCHEMA = z.strictObject({
  input: usdPerMillion,
  cached_input: usdPerMillion,
  output: usdPerMillion,
});
export type ModelPrice = z.infer<typeof PRICE_SCHEMA>;
export const PRICES_SCHEMA = z.record(z.string().min(1), PRICE_SCHEMA);
export type ModelPrices = z.infer<typeof PRICES_SCHEMA>;

const p = (input: number, cached_input: number, output: number): ModelPrice => ({
  input,
  cached_input,
  output,
});

/**
 * The providers' published list prices as of late 2025 (standard tier, no batch discount); where a
 * provider charges more for long prompts, the price of the shortest tier. Anthropic's cache writes
 * (1.25 × input) are counted as uncached input. Prices change: docs/configuration.md asks operators to check them.
 */
export const BUILTIN_PRICES: ModelPrices = {
  // OpenAI
  'gpt-5': p(1.25, 0.125, 10),
  'gpt-5-mini': p(0.25, 0.025, 2),
  'gpt-4.1': p(2, 0.5, 8),
  'gpt-4.1-mini': p(0.4, 0.1, 1.6),
  'gpt-4o': p(2.5, 1.25, 10),
  'gpt-4o-mini': p(0.15, 0.075, 0.6),
  'o4-mini': p(1.1, 0.275, 4.4),
  // Anthropic (cached: cache reads)
  'claude-sonnet-4-5': p(3, 0.3, 15),
  'claude-sonnet-4': p(3, 0.3, 15),
  'claude-opus-4-1': p(15, 1.5, 75),
  'claude-haiku-4-5': p(1, 0.1, 5),
  // Google (prompts up to 200k tokens)
  'gemini-2.5-pro': p(1.25, 0.125, 10),
  'gemini-2.5-flash': p(0.3, 0.03, 2.5),
  // DeepSeek (cache hit / cache miss)
  'deepseek-chat': p(0.28, 0.028, 0.42),
  'deepseek-reasoner': p(0.28, 0.028, 0.42),
  // Alibaba Cloud Model Studio, international (prompts up to 32k tokens)
  'qwen3-coder-plus': p(1, 0.2, 5),
};

/**
 * AGENTICFIX_MODEL_PRICES: a JSON object `{"<model>": {"input": …, "cached_input": …, "output": …}}`,
 * or the path of a file holding one (relative to the working directory). Throws with what is wrong.
 */
export function parsePrices(value: string, cwd: string): ModelPrices {
  let text = value;
  if (!value.trimStart().startsWith('{')) {
    const file = path.resolve(cwd, value);
    if (!existsSync(file)) throw new Error(`no JSON object and no such file: ${file}`);
    text = readFileSync(file, 'utf8');
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`not JSON: ${(e as Error).message}`);
  }
  const parsed = PRICES_SCHEMA.safeParse(raw);
  if (!parsed.success)
    throw new Error(
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
    );
  return parsed.data;
}

/** A cost as the comments and the CLI write it: cents for dollars, four decimals below one; else unknown. */
export const usd = (cost: unknown): string =>
  typeof cost === 'number' ? `$${cost.toFixed(cost >= 1 ? 2 : 4)}` : 'unknown';

/** What a cost was counted at, from a price as a trace recorded it (` at …`), or why there is none. */
export function priceNote(recorded: unknown): string {
  const p = PRICE_SCHEMA.safeParse(recorded);
  return p.success
    ? ` at ${p.data.input} input, ${p.data.cached_input} cached input, ${p.data.output} output USD per million tokens`
    : ' (the model has no price: AGENTICFIX_MODEL_PRICES can give it one)';
}
