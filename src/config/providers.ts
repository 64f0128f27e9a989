import { z } from 'zod';

/** Where each supported provider serves its OpenAI-compatible chat-completions API, and a sensible default model. */
const PROVIDER_PRESETS = {
  deepseek: { baseUrl: 'https://api.deepseek.com', model: 'deepseek-chat', needsKey: true },
  openai: { baseUrl: 'https://api.openai.com/v1', model: 'gpt-4.1', needsKey: true },
  gemini: {
    baseUrl: 'https://generativelanguage.googleapis.com/v1beta/openai/',
    model: 'gemini-2.5-pro',
    needsKey: true,
  },
  qwen: {
    baseUrl: 'https://dashscope.aliyuncs.com/compatible-mode/v1',
    model: 'qwen3-coder-plus',
    needsKey: true,
  },
  claude: { baseUrl: 'https://api.anthropic.com/v1/', model: 'claude-sonnet-4-5', needsKey: true },
  ollama: { baseUrl: 'http://localhost:11434/v1', model: 'qwen2.5-coder:7b', needsKey: false },
  vllm: { baseUrl: 'http://localhost:8000/v1', model: null, needsKey: false },
  llamacpp: { baseUrl: 'http://localhost:8080/v1', model: null, needsKey: false },
  custom: { baseUrl: null, model: null, needsKey: false },
} as const satisfies Record<string, { baseUrl: string | null; model: string | null; needsKey: boolean }>;

export type Provider = keyof typeof PROVIDER_PRESETS;
export const PROVIDERS = Object.keys(PROVIDER_PRESETS) as [Provider, ...Provider[]];

/** The model a provider uses when no name is configured (null: the name is required). */
export const defaultModelOf = (provider: Provider): string | null => PROVIDER_PRESETS[provider].model;

const ResolvedModelSchema = z.strictObject({
  provider: z.enum(PROVIDERS),
  baseUrl: z.url(),
  name: z.string().min(1),
  // Local servers accept any key; the SDK insists on a non-empty one.
  apiKey: z.string().min(1),
});
export type ResolvedModel = z.infer<typeof ResolvedModelSchema>;

export class ModelConfigError extends Error {}

/** The model settings a resolution starts from (the `model` part of the config). */
export interface ModelSettings {
  provider?: Provider;
  name?: string;
  apiKey?: string;
  baseUrl?: string;
}

/** Turns provider + optional name/key/base URL into a complete endpoint description, or explains what is missing. */
export function resolveModel(model: ModelSettings): ResolvedModel {
  if (!model.provider) {
    throw new ModelConfigError(`AGENTICFIX_MODEL_PROVIDER is not set (one of: ${PROVIDERS.join(', ')})`);
  }
  const preset = PROVIDER_PRESETS[model.provider];
  const baseUrl = model.baseUrl ?? preset.baseUrl;
  if (!baseUrl) throw new ModelConfigError(`provider ${model.provider} needs AGENTICFIX_MODEL_BASE_URL`);
  const name = model.name ?? preset.model;
  if (!name) throw new ModelConfigError(`provider ${model.provider} needs AGENTICFIX_MODEL_NAME`);
  if (preset.needsKey && !model.apiKey) {
    throw new ModelConfigError(`provider ${model.provider} needs AGENTICFIX_MODEL_API_KEY`);
  }
  const parsed = ResolvedModelSchema.safeParse({
    provider: model.provider,
    baseUrl,
    name,
    apiKey: model.apiKey ?? 'not-needed',
  });
  if (!parsed.success) {
    throw new ModelConfigError(
      `invalid model settings: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return parsed.data;
}
