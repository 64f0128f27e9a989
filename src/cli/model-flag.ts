import { loadScript, startScriptedModelServer } from '../emulator/scripted-model.js';
import type { ModelSpec } from '../pipeline/types.js';

/** The model name a `scripted:<file>` run asks for (and is priced by). */
const SCRIPTED = 'scripted';

/**
 * The model a `--model` flag names. `scripted:<file>` starts the scripted chat-completions server here,
 * in the entry point, and hands the run its URL: the run talks to it through the same SDK path as to a
 * real provider, and no stage depends on the emulator. Anything else is `otherwise()`.
 */
export async function modelFromFlag(
  flag: string | undefined,
  otherwise: () => ModelSpec,
): Promise<{ spec: ModelSpec; close(): Promise<void> }> {
  if (!flag?.startsWith('scripted:')) return { spec: otherwise(), close: async () => undefined };
  const script = loadScript(flag.slice('scripted:'.length));
  const server = await startScriptedModelServer(script.steps, { model: script.model });
  return {
    spec: { kind: 'url', baseUrl: server.url, apiKey: SCRIPTED, name: SCRIPTED },
    close: () => server.close(),
  };
}
