import type { ModelPrice } from '../config/prices.js';

/**
 * Token arithmetic shared by the scripted model server, the context benchmark and the run's cost. A token is
 * estimated as four characters of the request as sent; prompt caching follows OpenAI's published
 * rule: the part of a prompt identical to the start of the previous request is served from cache (a
 * provider keeps recent prefixes; the previous request is the one a tool loop can share most with),
 * counted only from 1,024 tokens on, in steps of 128 tokens, and reported as `cached_tokens`.
 */
export const CACHE_MIN_TOKENS = 1024;
export const CACHE_STEP_TOKENS = 128;
/**
 * Cached input as a share of the uncached input price: the benchmark's one assumption about billing.
 * A tenth is the deepest published discount (gpt-5, DeepSeek, Gemini 2.5, Anthropic cache reads), the
 * one least favourable to a context policy, since it makes resending the full history cheapest; gpt-4.1
 * and o4-mini charge a quarter, gpt-4o half (src/config/prices.ts).
 */
export const CACHED_PRICE = 0.1;

export const tokensOfChars = (chars: number): number => Math.ceil(chars / 4);
export const estimateTokens = (s: string): number => tokensOfChars(s.length);

/** The prompt as a provider sees it: tool schemas first, then the messages in order. */
export const promptText = (messages: unknown, tools: unknown): string => JSON.stringify([tools, messages]);

/** Tokens of `current` that a provider would serve from cache after having seen `previous`. */
export function cachedPrefixTokens(previous: string | null, current: string): number {
  if (!previous) return 0;
  const n = Math.min(previous.length, current.length);
  let i = 0;
  while (i < n && previous.charCodeAt(i) === current.charCodeAt(i)) i++;
  const tokens = Math.floor(i / 4);
  return tokens < CACHE_MIN_TOKENS ? 0 : Math.floor(tokens / CACHE_STEP_TOKENS) * CACHE_STEP_TOKENS;
}

/** What a prompt costs in uncached-token units. */
export const billedTokens = (prompt: number, cached: number, cachedPrice = CACHED_PRICE): number =>
  prompt - cached + cachedPrice * cached;

/**
 * What one request cost in USD at the model's prices per million tokens. `prompt` includes `cached`
 * (as OpenAI-compatible services report them): the cached part is priced at the cached rate.
 */
export const requestCostUsd = (
  price: ModelPrice,
  u: { prompt: number; cached: number; completion: number },
): number => {
  const cached = Math.min(u.cached, u.prompt);
  return (
    ((u.prompt - cached) * price.input + cached * price.cached_input + u.completion * price.output) / 1e6
  );
};
