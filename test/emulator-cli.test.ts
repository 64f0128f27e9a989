import { execa, type ResultPromise } from 'execa';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { tempDir } from './support/app.js';
import { dockerReady } from './support/docker.js';
import { CLI, freePort, until } from './support/e2e.js';
import { serviceUrl } from './support/services.js';

/**
 * Issue 27, "Done when": `agenticfix emulator` in one shell, `agenticfix serve` and `agenticfix worker` with
 * the environment it prints in two others; the demo issue it labels reaches a verified draft pull request,
 * and serve's /healthz and /metrics show it. Three processes from dist/, as a person would start them.
 */

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

interface Started {
  child: ResultPromise;
  out: () => string;
}
function start(args: string[], cwd: string, env: Record<string, string>): Started {
  mkdirSync(cwd, { recursive: true });
  const child = execa('node', [CLI, ...args], { cwd, env, extendEnv: false, reject: false });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, out: () => out };
}

/** The emulator's JSON lines (`--json`) printed so far. */
const events = (s: Started) =>
  s
    .out()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown> & { event: string });

describe('agenticfix emulator with serve and a worker', () => {
  let ready = false;
  const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');
  const database = serviceUrl('AGENTICFIX_TEST_DATABASE_URL');
  const schema = `emucli_${process.pid}`;
  let home: string;
  const started: Started[] = [];
  beforeAll(async () => {
    ready = (await dockerReady()) && redis !== null && database !== null;
    if (!ready) return;
    home = tempDir('emulator-cli-');
  }, 300_000);
  afterAll(async () => {
    for (const s of started) s.child.kill('SIGTERM');
    await Promise.all(started.map((s) => s.child));
    if (!ready) return;
    const admin = new pg.Client({ connectionString: database!.href });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
    rmSync(home, { recursive: true, force: true });
  }, 60_000);

  it('labels the demo issue once serve answers; the worker opens a verified draft pull request; serve shows it', async () => {
    if (!ready) return;
    const base = { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp' };
    const port = await freePort();
    const emulator = start(
      ['emulator', '--json', '--serve', `http://127.0.0.1:${port}`, '--dir', path.join(home, 'emulator')],
      home,
      base,
    );
    started.push(emulator);
    await until('the emulator', () => events(emulator).some((e) => e.event === 'ready'), 60_000);
    const printed = events(emulator).find((e) => e.event === 'ready')!.env as Record<string, string>;
    expect(printed).toMatchObject({ PORT: String(port), HOST: '127.0.0.1', APP_ID: expect.any(String) });

    const shared = {
      ...base,
      ...printed,
      AGENTICFIX_REDIS_URL: redis!.href,
      AGENTICFIX_DATABASE_URL: database!.href,
      AGENTICFIX_DATABASE_SCHEMA: schema,
      AGENTICFIX_QUEUE_NAME: schema,
    };
    const serve = start(['serve'], path.join(home, 'serve'), shared);
    started.push(serve);
    const worker = start(['worker'], path.join(home, 'worker'), {
      ...shared,
      AGENTICFIX_WORKER_PORT: '0',
      AGENTICFIX_WORKER_HOST: '127.0.0.1',
      // The suite does not depend on this host's iptables; the build network has tests of its own.
      AGENTICFIX_BUILD_NETWORK: 'unrestricted',
    });
    started.push(worker);

    await until(
      'the draft pull request',
      () => events(emulator).some((e) => e.event === 'pull_request'),
      300_000,
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}\n--- emulator\n${emulator.out()}\n--- serve\n${serve.out()}\n--- worker\n${worker.out()}`,
      );
    });
    const said = events(emulator);
    expect(said.find((e) => e.event === 'labeled')).toMatchObject({ issue: 1, status: 200 });
    expect(said.find((e) => e.event === 'pull_request')).toMatchObject({ number: 2, draft: true });

    const origin = `http://127.0.0.1:${port}`;
    const health = await get(`${origin}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toMatchObject({
      status: 'ok',
      checks: { store: { ok: true }, queue: { ok: true } },
    });
    const metrics = (await get(`${origin}/metrics`)).text;
    expect(metrics).toContain('agenticfix_webhook_deliveries_total{event="issues",outcome="new"} 1');
    // The run ended: nothing is queued or running any more, as serve reads the shared store.
    await until(
      'serve to count no run going on',
      async () => {
        const m = (await get(`${origin}/metrics`)).text;
        return ['queued', 'running'].every((s) => m.includes(`agenticfix_runs{state="${s}"} 0`));
      },
      30_000,
    );
    // The worker ran it and the judge verified it.
    const workerUrl = /health and metrics on (http:\S+)/.exec(worker.out())![1]!;
    await until(
      'the worker to count the verified run',
      async () =>
        (await get(`${workerUrl}/metrics`)).text.includes(
          'agenticfix_runs_ended_total{state="done",verdict="verified"} 1',
        ),
      30_000,
    );
  }, 600_000);
});
