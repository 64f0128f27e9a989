import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import { CALCULATOR_TEST_ARGV, calculatorScript, repoSource } from '../../../src/demo/calculator.js';
import type { GitHubEmulator } from '../../../src/emulator/github.js';
import { startScriptedModelServer } from '../../../src/emulator/scripted-model.js';
import { RUN_LABEL } from '../../../src/environment/containers.js';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { readMarker } from '../../../src/trace/marker.js';
import { SECRET, startEmulatedApp, startEmulator, tempDir, testConfig } from '../../support/app.js';
import { needDocker } from '../../support/docker.js';
import { freePort, startChild, until } from '../../support/e2e.js';
import { describeIf } from '../../support/skip.js';

/**
 * `agenticfix serve` (dist/, embedded mode: SQLite and the in-process queue) stopped with SIGTERM while
 * a run waits on the model with its test container up: it stops within its drain (AGENTICFIX_DRAIN_S)
 * and exits 0, the run ends `interrupted` with its cause on the issue, no container of the run is left,
 * and the run's trace ends with its stop. The next start leaves the run as it is.
 */

const O = 'octo';
const R = 'term';
const DRAIN_S = 2;
const docker = new Docker();
const engine = await needDocker();

describeIf(engine)('SIGTERM to a serve with a run in progress', () => {
  let emu: GitHubEmulator;
  let home: string;
  beforeAll(async () => {
    emu = await startEmulator();
    home = tempDir('serve-sigterm-');
  });
  afterAll(async () => {
    await emu?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('exits 0 within its drain, the run interrupted and named, no container left, its trace ended', async () => {
    const config = testConfig(home);
    // The environment is built, the tests run once (the run's container is up), then the model keeps
    // the run waiting: the SIGTERM lands mid-run.
    const model = await startScriptedModelServer([
      ...calculatorScript(config.sandbox.baseImage, [{ name: 'run_tests', arguments: {} }]).slice(0, 2),
      { content: 'thinking', delay_ms: 300_000 },
    ]);
    emu.createRepo(O, R, { fromDir: repoSource(home, CALCULATOR_TEST_ARGV) });
    emu.setPermission(O, R, 'maint', 'write');
    const port = await freePort();
    const { child, out } = startChild(emu, { role: 'serve', webhookSecret: SECRET, port }, home, model.url, {
      AGENTICFIX_DRAIN_S: String(DRAIN_S),
    });
    try {
      await until('serve to listen', () => out().includes('agenticfix listening'), 60_000);
      emu.setWebhookUrl(`http://127.0.0.1:${port}/api/github/webhooks`);
      const n = emu.createIssue(O, R, { title: 'subtract adds', user: 'rae' });
      expect((await emu.label(O, R, n, 'agenticfix', 'maint')).status).toBe(200);
      const completions = () => model.requests.filter((r) => r.method === 'POST').length;
      await until('the run to wait on the model', () => completions() >= 3, 300_000);
      const left = new SqliteRunStore(config.dbPath);
      const [run] = await left.forIssue(O, R, n);
      await left.close();
      expect(run).toMatchObject({ state: 'running' });
      const containers = () =>
        docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${run!.id}`] } });
      expect(await containers()).not.toEqual([]);

      const sent = Date.now();
      child.kill('SIGTERM');
      const { exitCode } = await child;
      const took = Date.now() - sent;
      expect({ exitCode, out: exitCode === 0 ? '' : out() }).toEqual({ exitCode: 0, out: '' });
      // The drain, then the run's stop (its container removed, its end recorded and said): seconds.
      expect(took).toBeLessThan((DRAIN_S + 20) * 1000);
      expect(await containers()).toEqual([]);

      const after = new SqliteRunStore(config.dbPath);
      expect(await after.get(run!.id)).toMatchObject({ state: 'interrupted', stop_reason: 'shutdown' });
      await after.close();
      const status = emu
        .comments(n, `${O}/${R}`)
        .filter((c) => c.user === emu.botLogin && readMarker(c.body)?.kind === 'status');
      expect(status.map((c) => c.body)).toEqual([expect.stringContaining('### AgenticFix: ⚠️ Interrupted')]);
      expect(status[0]!.body).toContain('The app shut down before the run finished.');
      // The trace has the loop's stop and the step after every stop, and the run's result is written.
      const dir = path.join(home, 'runs', run!.id);
      const events = readFileSync(path.join(dir, 'events.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; name?: string; stop_reason?: string });
      const stop = events.find((e) => e.type === 'stop');
      expect(stop).toMatchObject({ stop_reason: expect.any(String) });
      expect(events.at(-1)).toMatchObject({ type: 'step', name: 'patch_and_cleanup' });
      const result = JSON.parse(readFileSync(path.join(dir, 'result.json'), 'utf8')) as object;
      expect(result).toMatchObject({ run_id: run!.id, stop_reason: stop!.stop_reason, success: false });

      // The next start leaves the run as it ended: nothing to resume, nothing told twice.
      const next = await startEmulatedApp(emu, { config, sandbox: 'docker' });
      try {
        await next.idle();
        expect(await next.store.get(run!.id)).toMatchObject({ state: 'interrupted' });
      } finally {
        await next.close();
      }
      expect(emu.comments(n, `${O}/${R}`).filter((c) => c.user === emu.botLogin)).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
      await model.close();
    }
  }, 600_000);
});
