import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { execa, type ResultPromise } from 'execa';
import pg from 'pg';
import pino from 'pino';
import { childAppEnv } from '../cli/app-env.js';
import { startApp } from '../app.js';
import { loadConfig } from '../config/config.js';
import { calculatorScript, CALCULATOR_TEST_ARGV, repoSource } from '../demo/calculator.js';
import { startGitHubEmulator } from '../emulator/github.js';
import { startScriptedModelServer } from '../emulator/scripted-model.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import type { RunRecord } from '../store/store.js';
import { maxOverlap, pct, round } from './stats.js';
import { compose } from '../cli/compose.js';

const CLI = fileURLToPath(new URL('../cli/index.js', import.meta.url));
const CONCURRENCY = 2;
const OWNER = 'bench';
const REPO = 'calc';

/**
 * The same batch of demo runs (calculator issues, scripted model, Docker sandbox, judge, draft PRs)
 * through `serve` and one `agenticfix worker` process, then two: wall time of each batch, how many were
 * verified, the most runs one worker held at once and the queue latency (recorded → started).
 */
export async function benchScaleDemo(
  runs: number,
  redisUrl: string,
  databaseUrl: string,
  /** `--smoke`: only the batch with two workers, the same code as the one with one. */
  smoke = false,
): Promise<Record<string, number>> {
  const home = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-scale-'));
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const secret = randomBytes(16).toString('hex');
  const tag = `bench_demo_${process.pid}_${Date.now().toString(36)}`;
  const queue = {
    AGENTICFIX_DATABASE_URL: databaseUrl,
    AGENTICFIX_DATABASE_SCHEMA: tag,
    AGENTICFIX_REDIS_URL: redisUrl,
    AGENTICFIX_QUEUE_NAME: tag,
  };
  const config = loadConfig(
    {
      ...queue,
      AGENTICFIX_HOME: path.join(home, 'serve'),
      AGENTICFIX_RUNS_DIR: path.join(home, 'serve', 'runs'),
      // The emulator has no rate limits; GitHub's write spacing would only measure itself here.
      AGENTICFIX_GITHUB_WRITE_INTERVAL_MS: '0',
      AGENTICFIX_STATUS_EDIT_INTERVAL_MS: '0',
    },
    home,
  );
  const emu = await startGitHubEmulator({
    webhookSecret: secret,
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  });
  const model = await startScriptedModelServer(calculatorScript(config.sandbox.baseImage), {
    model: 'scripted',
    perConversation: true,
  });
  emu.createRepo(OWNER, REPO, { fromDir: repoSource(home, CALCULATOR_TEST_ARGV) });
  emu.setPermission(OWNER, REPO, 'maint', 'write');
  const app = await startApp({
    config,
    ...compose(config),
    appId: emu.appId,
    privateKey,
    webhookSecret: secret,
    baseUrl: emu.url,
    port: 0,
    log: pino({ level: 'silent' }),
  });
  emu.setWebhookUrl(app.url);

  // Wrapped: an execa process is a promise, and returning it from an async function would wait for its end.
  const startWorker = async (id: string): Promise<{ child: ResultPromise }> => {
    const workerHome = path.join(home, id);
    mkdirSync(workerHome, { recursive: true });
    const child = execa('node', [CLI, 'worker'], {
      cwd: workerHome,
      extendEnv: false,
      reject: false,
      env: childAppEnv(
        {
          role: 'worker',
          workerId: id,
          concurrency: CONCURRENCY,
          home: workerHome,
          githubUrl: emu.url,
          appId: emu.appId,
          privateKey,
          modelUrl: model.url,
        },
        queue,
      ),
    });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const end = Date.now() + 60_000;
    while (!out.includes('taking runs')) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`worker ${id} did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return { child };
  };

  const batch = async (workerIds: string[]) => {
    const workers = await Promise.all(workerIds.map(startWorker));
    try {
      const t0 = performance.now();
      const issues = Array.from({ length: runs }, (_, i) =>
        emu.createIssue(OWNER, REPO, { title: `subtract is wrong (${workerIds.length}/${i})`, user: 'rae' }),
      );
      for (const n of issues) await emu.label(OWNER, REPO, n, 'agenticfix', 'maint');
      let done: RunRecord[] = [];
      while (done.length < runs) {
        if (performance.now() - t0 > 900_000) throw new Error(`only ${done.length} of ${runs} runs ended`);
        await new Promise((r) => setTimeout(r, 200));
        const all = await Promise.all(issues.map((n) => app.store.forIssue(OWNER, REPO, n)));
        done = all.flatMap((r) => r.filter((run) => run.finished_at !== null));
      }
      return { seconds: (performance.now() - t0) / 1000, runs: done };
    } finally {
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.child));
    }
  };

  const ran: RunRecord[] = [];
  try {
    const one = smoke ? null : await batch(['w1']);
    const two = await batch(['w2', 'w3']);
    ran.push(...(one?.runs ?? []), ...two.runs);
    const latency = ran.map((r) => Date.parse(r.started_at!) - Date.parse(r.created_at));
    const perWorker = new Map<string, RunRecord[]>();
    for (const r of ran) perWorker.set(r.worker ?? '?', [...(perWorker.get(r.worker ?? '?') ?? []), r]);
    return {
      runs,
      verified: two.runs.filter((r) => r.verdict === 'verified').length,
      ...(one && {
        verified_with_1_worker: one.runs.filter((r) => r.verdict === 'verified').length,
        workers_1_s: round(one.seconds),
      }),
      concurrency: CONCURRENCY,
      max_concurrent_per_worker: Math.max(...[...perWorker.values()].map(maxOverlap)),
      workers_2_s: round(two.seconds),
      queue_latency_p50_ms: round(pct(latency, 50)),
      queue_latency_p99_ms: round(pct(latency, 99)),
    };
  } finally {
    await app.close();
    await model.close();
    await emu.close();
    const sweep = new DockerEnvironmentBuilder(new Docker(), {
      ...config.sandbox,
      imageKeep: 0,
      imageMaxAgeMs: 0,
    });
    for (const r of ran)
      for (const id of [r.id, `${r.id}-verify`]) await sweep.gc({ runId: id }).catch(() => undefined);
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${tag} CASCADE`);
    await admin.end();
    rmSync(home, { recursive: true, force: true });
  }
}
