import { jest } from '@jest/globals';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunningApp } from '../../../src/app.js';
import { compose } from '../../../src/cli/compose.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { REAL_JOB_DEPS } from '../../../src/pipeline/job.js';
import type { JudgeOptions } from '../../../src/verify/types.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  calcFixScript,
  localJudge,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
} from '../../support/app.js';

/**
 * Issue 39, item 2: one composition root (src/cli/compose.ts). A process builds one workspace manager,
 * one image builder and one sandbox factory, and a run and its judge meet in them (the manager's
 * in-process queue per mirror, the builder's leases), not only at a file lock.
 */
describe('one composition root', () => {
  const O = 'acme';
  const R = 'calc';
  let emu: GitHubEmulator;
  let model: ScriptedModelServer;
  let app: RunningApp;
  let home: string;

  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG } });
    emu.setPermission(O, R, 'maint', 'write');
    model = await startScriptedModelServer(calcFixScript('Changed `add` to add.'));
    home = tempDir('composition-root-');
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await emu?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("a run's job, its repair and its judge all work through the process's one manager and builder", async () => {
    const config = testConfig(home);
    const parts = compose(config);
    const mirror = jest.spyOn(parts.workspaces, 'mirror');
    const create = jest.spyOn(parts.workspaces, 'create');
    const judged: JudgeOptions[] = [];
    app = await startEmulatedApp(emu, {
      config,
      ...parts,
      // The real repair (local sandbox, scripted model); the judge is the local stand-in, told what it got.
      deps: { ...REAL_JOB_DEPS, judge: (o) => (judged.push(o), localJudge(o)) },
      model: { kind: 'url', baseUrl: model.url, name: 'scripted' },
      sandbox: 'local',
    });
    emu.setWebhookUrl(app.url);
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();

    const [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    // The job fetched the mirror and the repair made its worktree through the composed manager.
    expect(mirror).toHaveBeenCalled();
    expect(create.mock.calls.map((c) => c[2])).toContain(run!.id);
    // The judge was handed the same manager and the same image builder (and sandboxes) as the repair.
    expect(judged).toHaveLength(1);
    expect(judged[0]!.workspaces).toBe(parts.workspaces);
    expect(judged[0]!.images).toBe(parts.images);
    expect(judged[0]!.sandboxes).toBe(parts.sandboxes);
  }, 60_000);

  // Everything a run shares is built by the composition root (the benchmarks measure the builder itself);
  // a stage that built its own would meet the others only at a file lock again.
  it('no module outside src/cli constructs a workspace manager, an image builder or a sandbox', () => {
    const src = fileURLToPath(new URL('../../../src/', import.meta.url));
    const built = /new (GitWorkspaceManager|DockerEnvironmentBuilder|LocalSandbox|DockerSandbox)\(/g;
    // The builder's sandboxFor is the factory's container sandbox (compose.ts wraps it); the start-up's
    // mount self-check probes the engine with one container of the base image before any run.
    const allowed = (file: string, what: string) =>
      /^(cli|bench)\//.test(file) ||
      (what === 'DockerSandbox' && ['images/builder.ts', 'environment/startup.ts'].includes(file));
    const offenders = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .flatMap((file) =>
        [...readFileSync(path.join(src, file), 'utf8').matchAll(built)]
          .filter((m) => !allowed(file, m[1]!))
          .map((m) => `${file}: ${m[0]}`),
      );
    expect(offenders).toEqual([]);
  });
});
