import { execa, type ResultPromise } from 'execa';
import { mkdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { tempDir } from '../../support/app.js';
import { needDistributed } from '../../support/distributed-world.js';
import { CLI, freePort, until } from '../../support/e2e.js';
import { servicePlace } from '../../support/services.js';
import { describeIf } from '../../support/skip.js';

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

const needs = await needDistributed();
describeIf(needs)('agenticfix emulator with serve and a worker', () => {
  const place = servicePlace('emucli');
  let home: string;
  const started: Started[] = [];
  beforeAll(async () => {
    home = tempDir('emulator-cli-');
  }, 300_000);
  afterAll(async () => {
    for (const s of started) s.child.kill('SIGTERM');
    await Promise.all(started.map((s) => s.child));
    await place.drop();
    rmSync(home, { recursive: true, force: true });
  }, 60_000);

  it('labels the demo issue once serve answers; the worker opens a verified draft pull request; serve shows it', async () => {
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
      ...place.env,
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
    // Issues #1 and #2 are the emulator's; the pull request comes next.
    expect(said.find((e) => e.event === 'pull_request')).toMatchObject({ number: 3, draft: true });

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
    const workerUrl = /health and metrics on (http:[^\s"]+)/.exec(worker.out())![1]!;
    await until(
      'the worker to count the verified run',
      async () =>
        /^agenticfix_runs_ended_total\{state="done",verdict="verified",reason="\w+"\} 1$/m.test(
          (await get(`${workerUrl}/metrics`)).text,
        ),
      30_000,
    );
  }, 600_000);
});

// Issue 38, item 4: the emulator labelled once (a second try needed a new emulator), printed no OAuth
// client, and its HOST=127.0.0.1 and PORT, pasted into a container's .env, made serve unreachable.
describe('agenticfix emulator by hand', () => {
  let home: string;
  beforeAll(() => (home = tempDir('emulator-hand-')));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('prints its OAuth client, keeps HOST and PORT apart, and labels again when told on its input', async () => {
    const hooks: { event: string; action: string; issue: number }[] = [];
    const serve = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const p = JSON.parse(body || '{}') as { action?: string; issue?: { number: number } };
        hooks.push({
          event: String(req.headers['x-github-event']),
          action: p.action!,
          issue: p.issue!.number,
        });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => serve.listen(0, '127.0.0.1', r));
    const port = (serve.address() as AddressInfo).port;
    const emulator = start(['emulator', '--no-label', '--serve', `http://127.0.0.1:${port}`], home, {
      PATH: process.env.PATH!,
      HOME: home,
    });
    try {
      await until('the emulator', () => emulator.out().includes('label again'), 60_000);
      const lines = emulator.out().split('\n');
      const marker = lines.findIndex((l) => l.startsWith('# serve run by hand on this machine only'));
      expect(marker).toBeGreaterThan(0);
      const names = (ls: string[]) =>
        ls.filter((l) => l.startsWith('export ')).map((l) => l.split(/[ =]/)[1]);
      // What goes into any .env (a container's too), then the two lines for serve on this machine.
      expect(names(lines.slice(0, marker))).toEqual(
        expect.arrayContaining(['APP_ID', 'WEBHOOK_SECRET', 'GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET']),
      );
      expect(names(lines.slice(0, marker))).not.toContain('HOST');
      expect(names(lines.slice(0, marker))).not.toContain('PORT');
      expect(names(lines.slice(marker, marker + 3))).toEqual(['HOST', 'PORT']);
      expect(emulator.out()).toMatch(/export GITHUB_CLIENT_ID=Iv1\.[0-9a-f]{16}\n/);

      emulator.child.stdin!.write('label 2\nlabel\nlabel 9\n');
      await until('two labels', () => hooks.length >= 2, 30_000);
      expect(hooks).toEqual([
        { event: 'issues', action: 'labeled', issue: 2 },
        { event: 'issues', action: 'labeled', issue: 1 },
      ]);
      await until(
        'the answers',
        () => /labelled #1/.test(emulator.out()) && /label 1` or `label 2`/.test(emulator.out()),
        10_000,
      );
      expect(emulator.out()).toContain(
        "maintainer-mona labelled #2 'agenticfix': serve answered the webhook with HTTP 200",
      );
    } finally {
      emulator.child.kill('SIGTERM');
      await emulator.child;
      serve.close();
    }
  }, 120_000);
});
