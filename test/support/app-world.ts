import { rmSync } from 'node:fs';
import type { RunningApp } from '../../src/app.js';
import type { Config } from '../../src/config/config.js';
import type { GitHubEmulator } from '../../src/emulator/github.js';
import type { Permission } from '../../src/emulator/github-state.js';
import {
  startScriptedModelServer,
  type ScriptedModelServer,
  type ScriptedServerOptions,
  type ScriptStep,
} from '../../src/emulator/scripted-model.js';
import type { JobDeps } from '../../src/pipeline/context.js';
import { REAL_JOB_DEPS } from '../../src/pipeline/job.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  localJudge,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
  waitFor,
} from './app.js';

/**
 * The app under test with what it talks to: the GitHub emulator delivering its webhooks to the app, a
 * home with its config, and (given a script) the scripted model as its model. One start, one close.
 */

/** The real pipeline driven by a scripted model, judged by the stand-in judge, with a one-line evidence. */
export const SCRIPTED_DEPS: JobDeps = {
  ...REAL_JOB_DEPS,
  judge: localJudge,
  renderEvidence: (r) => `Verdict ${r.verdict}.`,
};

/** A custom model provider with no server behind it (the repair is a stand-in) that prices `priced-model`. */
export const PRICED_MODEL_ENV = {
  AGENTICFIX_MODEL_PROVIDER: 'custom',
  AGENTICFIX_MODEL_BASE_URL: 'http://127.0.0.1:9/v1',
  AGENTICFIX_MODEL_PRICES: JSON.stringify({ 'priced-model': { input: 2, cached_input: 0.5, output: 10 } }),
};

type AppOptions = Omit<Parameters<typeof startEmulatedApp>[1], 'config'>;

export type AppWorldOptions = Partial<AppOptions> & {
  /** A home to use, kept at close; by default a fresh temporary one, removed at close. */
  home?: string;
  /** Settings on top of testConfig's. */
  env?: Record<string, string>;
  /** Starts a scripted model with these steps as the app's model; the deps default to SCRIPTED_DEPS. */
  script?: ScriptStep[];
  /** The name the app asks the scripted model for (`scripted` unless said). */
  modelName?: string;
  /** The scripted model's options (e.g. a script per conversation). */
  scripted?: ScriptedServerOptions;
};

export interface AppWorld {
  emu: GitHubEmulator;
  app: RunningApp;
  config: Config;
  home: string;
  /** The scripted model, when a script was given. */
  model: ScriptedModelServer | undefined;
  /** Closes the app (`app`: the one running now, where a test started another), the model and the emulator. */
  close(app?: RunningApp): Promise<void>;
}

export async function startAppWorld(o: AppWorldOptions = {}): Promise<AppWorld> {
  const { home: given, env = {}, script, modelName = 'scripted', scripted, ...appOptions } = o;
  const emu = await startEmulator();
  const model = script ? await startScriptedModelServer(script, scripted) : undefined;
  const home = given ?? tempDir('app-world-');
  const config = testConfig(home, env);
  const app = await startEmulatedApp(emu, {
    sandbox: 'local',
    ...(model && {
      deps: SCRIPTED_DEPS,
      model: { kind: 'url' as const, baseUrl: model.url, name: modelName },
    }),
    ...appOptions,
    config,
  });
  emu.setWebhookUrl(app.url);
  return {
    emu,
    app,
    config,
    home,
    model,
    async close(running = app) {
      await running.close();
      await model?.close();
      await emu.close();
      if (!given) rmSync(home, { recursive: true, force: true });
    },
  };
}

/** A repository of CALC_FILES with `config` (CALC_CONFIG by default) in which `maint` has `permission`. */
export function calcRepo(
  emu: GitHubEmulator,
  owner: string,
  repo: string,
  o: { config?: string; permission?: Permission } = {},
): void {
  emu.createRepo(owner, repo, {
    files: { ...CALC_FILES, '.github/agenticfix.yml': o.config ?? CALC_CONFIG },
  });
  emu.setPermission(owner, repo, 'maint', o.permission ?? 'maintain');
}

/** A calcRepo whose deliveries go to `app`, its issue labelled, and its run once the app is idle. */
export async function calcRunEnded(app: RunningApp, emu: GitHubEmulator, owner: string, repo: string) {
  calcRepo(emu, owner, repo);
  emu.setWebhookUrl(app.url);
  const n = await labelledIssue(app, emu, owner, repo);
  await app.idle();
  const [run] = await app.store.forIssue(owner, repo, n);
  return run;
}

/** alice's issue "add() subtracts", labelled `agenticfix` by `maint`; its number once its run is recorded. */
export async function labelledIssue(app: RunningApp, emu: GitHubEmulator, owner: string, repo: string) {
  const n = emu.createIssue(owner, repo, { title: 'add() subtracts', user: 'alice' });
  await emu.label(owner, repo, n, 'agenticfix', 'maint');
  await waitFor(async () => (await app.store.forIssue(owner, repo, n)).length === 1);
  return n;
}
