import { cpSync } from 'node:fs';
import path from 'node:path';
import { compose } from '../../src/cli/compose.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import {
  startScriptedModelServer,
  type RecordedRequest,
  type ScriptedServerOptions,
  type ScriptStep,
} from '../../src/emulator/scripted-model.js';
import { runRepair } from '../../src/pipeline/repair.js';
import type { RepairOptions } from '../../src/pipeline/types.js';
import type { RepairResult } from '../../src/agent/types.js';
import { BASE_IMAGE } from './docker.js';
import { makeSourceRepo, tempDir } from './git-fixtures.js';

/** The repair (runRepair) of a scratch repository, driven by the scripted model: what its tests share. */

/** A scripted model step that makes one tool call; `id` names the call (see `observation`). */
export const call = (name: string, args: Record<string, unknown> | string = {}, id?: string): ScriptStep => ({
  tool_calls: [{ ...(id !== undefined && { id }), name, arguments: args }],
});

/** What the model was first shown for tool call `id` (later requests may cut old observations). */
export function observation(requests: readonly Pick<RecordedRequest, 'body'>[], id: string): string {
  type Body = { messages?: { role: string; tool_call_id?: string; content: string }[] };
  const found = requests
    .map((r) => (r.body as Body | null)?.messages?.find((m) => m.role === 'tool' && m.tool_call_id === id))
    .find(Boolean);
  if (!found) throw new Error(`the model was never shown tool call ${id}`);
  return found.content;
}

export interface RepairFixture {
  /** The scratch directory (removed by `cleanup`). */
  dir: string;
  /** The source repository: branch main, one commit. */
  repo: string;
  /** A config whose home is `home` in the scratch directory, BASE_IMAGE its base image, `env` on top. */
  config(home?: string, env?: Record<string, string>): Config;
  /**
   * runRepair of the repository's main for the issue "add() subtracts", its model `m` a scripted model
   * of `script` (started with `server`, closed after); `more` on top. The model's requests come back.
   */
  repair(
    config: Config,
    script: ScriptStep[],
    more?: Partial<RepairOptions> & { server?: ScriptedServerOptions },
  ): Promise<{ result: RepairResult; requests: RecordedRequest[] }>;
  cleanup(): Promise<void>;
}

/** A scratch directory holding a repository of `source`: a fixture directory to copy, or files by path. */
export async function repairFixture(
  prefix: string,
  source: string | Record<string, string>,
): Promise<RepairFixture> {
  const { dir, cleanup } = await tempDir(prefix);
  const repo = path.join(dir, 'repo');
  if (typeof source === 'string') cpSync(source, repo, { recursive: true });
  await makeSourceRepo(repo, typeof source === 'string' ? {} : source);
  return {
    dir,
    repo,
    cleanup,
    config: (home = 'home', env = {}) =>
      loadConfig({ AGENTICFIX_HOME: path.join(dir, home), AGENTICFIX_BASE_IMAGE: BASE_IMAGE, ...env }, dir),
    async repair(config, script, { server: options, ...more } = {}) {
      const server = await startScriptedModelServer(script, options);
      try {
        const result = await runRepair({
          ...compose(config),
          config,
          remote: repo,
          baseCommit: 'main',
          issue: { title: 'add() subtracts', body: '' },
          testArgv: ['true'],
          model: { kind: 'url', baseUrl: server.url, name: 'm' },
          sandbox: 'docker',
          ...more,
        });
        return { result, requests: server.requests };
      } finally {
        await server.close();
      }
    },
  };
}
