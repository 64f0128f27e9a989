import { rmSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { RunningApp } from '../../src/app.js';
import type { GitHubEmulator } from '../../src/emulator/github.js';
import { startScriptedModelServer, type ScriptedModelServer } from '../../src/emulator/scripted-model.js';
import {
  CALC_CONFIG,
  CALC_FILES,
  CALC_FIX,
  fakeDeps,
  startEmulatedApp,
  startEmulator,
  tempDir,
  testConfig,
} from '../support/app.js';
import { needDocker } from '../support/docker.js';
import { needService, servicePlace } from '../support/services.js';
import { describeIf, needAll } from '../support/skip.js';
import { startChild, until } from '../support/e2e.js';

/** Issue 27, item 3: /ping, /healthz and /metrics on serve and on workers, and log lines per run. */

const O = 'acme';
const R = 'calc';

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
};

const engine = await needDocker();
describeIf(engine)('serve', () => {
  let emu: GitHubEmulator;
  let app: RunningApp;
  let home: string;
  let origin: string;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    emu = await startEmulator();
    emu.createRepo(O, R, { files: { ...CALC_FILES, '.github/agenticfix.yml': CALC_CONFIG } });
    emu.setPermission(O, R, 'maint', 'write');
    home = tempDir('observe-');
    const log = pino(
      { level: 'info' },
      new Writable({
        write(line: Buffer, _enc, done) {
          lines.push(JSON.parse(line.toString()) as Record<string, unknown>);
          done();
        },
      }),
    );
    app = await startEmulatedApp(emu, {
      config: testConfig(home),
      deps: fakeDeps({ edits: () => CALC_FIX }),
      sandbox: 'docker', // the runs run here: Docker is among the checks
      log,
    });
    emu.setWebhookUrl(app.url);
    origin = new URL(app.url).origin;
  });
  afterAll(async () => {
    await app?.close();
    await emu?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('/ping answers, /healthz reports each check, and 503 when one fails', async () => {
    expect(await get(`${origin}/ping`)).toMatchObject({ status: 200, text: 'PONG' });
    const health = await get(`${origin}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toEqual({
      status: 'ok',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      commit: expect.any(String),
      node: process.version,
      checks: {
        store: { ok: true, ms: expect.any(Number) },
        docker: { ok: true, ms: expect.any(Number) },
      },
    });
    // The engine gone (here: the client pointed at a socket that does not exist).
    const saved = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = 'unix:///nonexistent/docker.sock';
    try {
      const failing = await get(`${origin}/healthz`);
      expect(failing.status).toBe(503);
      expect(JSON.parse(failing.text)).toMatchObject({
        status: 'failing',
        checks: { store: { ok: true }, docker: { ok: false, error: expect.stringContaining('ENOENT') } },
      });
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
    expect((await get(`${origin}/nowhere`)).status).toBe(404);
  });

  it('/metrics counts deliveries, runs by state and verdict, queue depth, durations and tokens; each run step is logged', async () => {
    const n = emu.createIssue(O, R, { title: 'add() subtracts', user: 'alice' });
    await emu.label(O, R, n, 'agenticfix', 'maint');
    await app.idle();
    const [run] = await app.store.forIssue(O, R, n);
    expect(run).toMatchObject({ state: 'done', verdict: 'verified' });
    const m = await get(`${origin}/metrics`);
    expect(m.status).toBe(200);
    expect(m.type).toContain('text/plain');
    for (const line of [
      'agenticfix_webhook_deliveries_total{event="issues",outcome="new"} 1',
      'agenticfix_queue_depth 0',
      'agenticfix_runs{state="running"} 0',
      'agenticfix_run_phase_seconds_count{phase="agent"} 1',
      'agenticfix_run_duration_seconds_count{stop_reason="completed"} 1',
      'agenticfix_model_tokens_total{kind="prompt"} 100',
      'agenticfix_model_tokens_total{kind="completion"} 20',
    ])
      expect(m.text).toContain(line);
    expect(m.text).toMatch(
      /^agenticfix_runs_ended_total\{state="done",verdict="verified",reason="\w+"\} 1$/m,
    );
    const said = lines
      .filter((l) => l.run === run!.id || l.delivery)
      .map((l) => [l.msg, l.phase ?? l.state ?? null]);
    expect(said).toEqual(
      expect.arrayContaining([
        ['delivery taken', null],
        ['run started', null],
        ['run phase', 'preparing_workspace'],
        ['run phase', 'working'],
        ['run phase', 'verifying'],
        ['run phase', 'publishing'],
        ['run work done', 'done'],
        ['run ended', 'done'],
      ]),
    );
    expect(said).not.toContainEqual(['run phase', 'done']); // the repair's end, before the judge
    expect(lines.find((l) => l.msg === 'run started')).toMatchObject({
      level: 30,
      repo: `${O}/${R}`,
      issue: n,
    });
  });
});

const services = [needService('AGENTICFIX_TEST_REDIS_URL'), needService('AGENTICFIX_TEST_DATABASE_URL')];
describeIf(needAll(engine, ...services))('a worker', () => {
  const place = servicePlace('observe');
  let emu: GitHubEmulator;
  let home: string;
  let worker: ReturnType<typeof startChild> | null = null;
  // The worker's start-up check asks the model endpoint (GET /v1/models) before it takes runs.
  let model: ScriptedModelServer | null = null;
  beforeAll(async () => {
    model = await startScriptedModelServer([]);
    emu = await startEmulator();
    home = tempDir('observe-worker-');
  }, 300_000);
  afterAll(async () => {
    worker?.child.kill('SIGTERM');
    await worker?.child;
    await emu?.close();
    await model?.close();
    await place.drop();
    if (home) rmSync(home, { recursive: true, force: true });
  }, 60_000);

  it('answers /ping, /healthz (store, queue, Docker) and /metrics on its own port, and logs pretty lines with LOG_FORMAT=pretty', async () => {
    worker = startChild(
      emu,
      { role: 'worker', workerId: 'w-observe', concurrency: 1 },
      path.join(home, 'w'),
      model!.url,
      {
        ...place.env,
        AGENTICFIX_BUILD_NETWORK: 'unrestricted',
        LOG_LEVEL: 'info',
        LOG_FORMAT: 'pretty',
      },
    );
    await until(
      'the worker to listen',
      () => /health and metrics on (http:[^\s"]+)/.test(worker!.out()),
      120_000,
    );
    const base = /health and metrics on (http:[^\s"]+)/.exec(worker.out())![1]!;
    expect(new URL(base).hostname).toBe('127.0.0.1');
    expect(await get(`${base}/ping`)).toMatchObject({ status: 200, text: 'PONG' });
    const health = await get(`${base}/healthz`);
    expect(JSON.parse(health.text)).toMatchObject({
      status: 'ok',
      checks: { store: { ok: true }, queue: { ok: true }, docker: { ok: true } },
    });
    expect(health.status).toBe(200);
    const m = await get(`${base}/metrics`);
    // The store-wide gauges are serve's alone: a sum over every process counts the store once.
    expect(m.text).not.toContain('agenticfix_queue_depth');
    expect(m.text).not.toMatch(/^agenticfix_runs\{/m);
    expect(m.text).toMatch(/^agenticfix_build_info\{version="[^"]+",commit="[^"]+",node="v\d+[^"]*"\} 1$/m);
    expect(m.text).toContain('agenticfix_process_cpu_seconds_total');
    // Pretty: a level word and the message on one line, not a JSON object.
    expect(worker.out()).toMatch(/INFO.*start-up cleanup done/);
    expect(worker.out()).not.toMatch(/^\{"level":30/m);
  }, 180_000);
});
