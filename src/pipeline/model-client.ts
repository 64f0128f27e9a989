import type { Config } from '../config/config.js';
import type { ModelSpec } from './types.js';
import { HumanModel, OpenAIChatModel, type ModelClient } from '../agent/model.js';
import type { RetryInfo } from '../agent/retry.js';
import { resolveModel } from '../config/providers.js';

export interface ModelHandle {
  client: ModelClient;
  /** What the run records about the model (never the key). */
  describe: Record<string, unknown>;
  close(): Promise<void>;
}

/** The model client for a ModelSpec (a scripted model is a `url` its caller started). */
export async function createModelClient(
  spec: ModelSpec,
  model: Config['model'],
  onRetry: (info: RetryInfo) => void,
): Promise<ModelHandle> {
  const common = {
    timeoutMs: model.timeoutMs,
    maxRetries: model.maxRetries,
    retryBaseMs: model.retryBaseMs,
    maxReplyBytes: model.maxReplyBytes,
    onRetry,
  };
  const nothing = async () => undefined;
  switch (spec.kind) {
    case 'openai': {
      const m = resolveModel(model);
      return {
        client: new OpenAIChatModel({ ...common, baseUrl: m.baseUrl, apiKey: m.apiKey, name: m.name }),
        describe: { kind: 'openai', provider: m.provider, base_url: m.baseUrl, name: m.name },
        close: nothing,
      };
    }
    case 'url':
      return {
        client: new OpenAIChatModel({
          ...common,
          baseUrl: spec.baseUrl,
          apiKey: spec.apiKey ?? 'not-needed',
          name: spec.name,
        }),
        describe: { kind: 'url', base_url: spec.baseUrl, name: spec.name },
        close: nothing,
      };
    case 'human': {
      const client = new HumanModel(spec.input ?? process.stdin, spec.output ?? process.stdout);
      return { client, describe: { kind: 'human' }, close: async () => client.close() };
    }
  }
}
