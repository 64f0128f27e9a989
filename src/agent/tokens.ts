import type { ModelPrice } from '../config/prices.js';

/**
 * Token arithmetic shared by the scripted model server, the context benchmark and the run's cost. A token is
 * estimated as four characters of the request as sent; prompt caching follows OpenAI's published
 * rule: a cached prefix counts only from 1,024 tokens on, in steps of 128 tokens.
 */
export const CACHE_MIN_TOKENS = 1024;
export const CACHE_STEP_TOKENS = 128;
/** Cached input is billed at about a tenth of uncached input (OpenAI, DeepSeek, Anthropic). */
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
export const billedTokens = (prompt: number, cached: number): number =>
  prompt - cached + CACHED_PRICE * cached;

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
