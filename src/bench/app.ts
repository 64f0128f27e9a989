import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import pino from 'pino';
import { loadConfig } from '../config/config.js';
import { runAppDemo } from '../demo/app.js';
import { dockerAvailable, LABEL } from '../environment/docker.js';
import { startGitHubEmulator } from '../emulator/github.js';
import { REAL_JOB_DEPS, type JobDeps } from '../pipeline/job.js';
import { startApp } from '../webhook/server.js';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const round = (x: number) => Math.round(x * 10) / 10;

/** Acknowledgement latency of 200 concurrent signed label deliveries (runs parked until shutdown). */
async function webhookLatency(): Promise<Record<string, number>> {
  const home = mkdtempSync(path.join(tmpdir(), 'bench-app-'));
  const config = loadConfig({ AGENTICFIX_HOME: home, AGENTICFIX_RUNS_DIR: path.join(home, 'runs') }, home);
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const secret = randomBytes(8).toString('hex');
  const emu = await startGitHubEmulator({
    webhookSecret: secret,
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  });
  // The handlers are what is measured: the runs they enqueue wait until the app closes.
  const parked: JobDeps = {
    ...REAL_JOB_DEPS,
    repair: (o) =>
      new Promise((_, reject) => o.signal?.addEventListener('abort', () => reject(new Error('closed')))),
    judge: () => Promise.reject(new Error('not reached')),
  };
  const app = await startApp({
    config,
    appId: emu.appId,
    privateKey: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    webhookSecret: secret,
    baseUrl: emu.url,
    port: 0,
    deps: parked,
    log: pino({ level: 'silent' }),
  });
  try {
    emu.setWebhookUrl(app.url);
    emu.createRepo('bench', 'repo', { files: { 'README.md': '# bench\n' } });
    emu.setPermission('bench', 'repo', 'maintainer', 'write');
    const n = 200;
    const issues = Array.from({ length: n }, (_, i) =>
      emu.createIssue('bench', 'repo', { title: `issue ${i}`, user: 'someone' }),
    );
    const latencies = await Promise.all(
      issues.map(async (issue) => {
        const t0 = performance.now();
        const d = await emu.label('bench', 'repo', issue, config.app.label, 'maintainer');
        if (d.status >= 300) throw new Error(`delivery refused: ${d.status}`);
        return performance.now() - t0;
      }),
    );
    return {
      webhook_deliveries: n,
      webhook_ack_p50_ms: round(pct(latencies, 50)),
      webhook_ack_p99_ms: round(pct(latencies, 99)),
      webhook_ack_max_ms: round(Math.max(...latencies)),
    };
  } finally {
    await app.close();
    await emu.close();
    rmSync(home, { recursive: true, force: true });
  }
}

/** Label-to-draft-PR wall time of the demo, cold (no environment image) and warm, and the share outside test runs. */
async function demoWallTime(): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { demo_skipped: 'no Docker engine' };
  const home = mkdtempSync(path.join(tmpdir(), 'bench-demo-'));
  const config = loadConfig({ AGENTICFIX_HOME: home, AGENTICFIX_RUNS_DIR: path.join(home, 'runs') }, home);
  const out: Record<string, number | string> = {};
  for (const phase of ['cold', 'warm'] as const) {
    if (phase === 'cold') {
      const images = await docker.listImages({ filters: { label: [`${LABEL}=1`] } });
      for (const img of images)
        await docker
          .getImage(img.Id)
          .remove({ force: true })
          .catch(() => undefined);
    }
    const t0 = performance.now();
    const s = await runAppDemo({ config, model: 'scripted', log: () => {} });
    const wall = performance.now() - t0;
    if (s.result !== 'success') throw new Error(`demo failed: ${s.error}`);
    const testMs = testRunTime(s.trace_path!, path.join(config.runsDir, `${s.run_id}-verify`, 'report.json'));
    out[`demo_${phase}_label_to_pr_s`] = round(wall / 1000);
    out[`demo_${phase}_test_runs_s`] = round(testMs / 1000);
    out[`demo_${phase}_share_outside_tests`] = round((1 - testMs / wall) * 100) / 100;
  }
  rmSync(home, { recursive: true, force: true });
  return out;
}

/** Time spent in test runs: the agent's run_tests calls plus the judge's cells. */
function testRunTime(eventsPath: string, reportPath: string): number {
  const agent = readFileSync(eventsPath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; name?: string; duration_ms?: number })
    .filter((e) => e.type === 'tool_end' && e.name === 'run_tests')
    .reduce((sum, e) => sum + (e.duration_ms ?? 0), 0);
  const report = JSON.parse(readFileSync(reportPath, 'utf8')) as { cells: { duration_ms: number }[] };
  return agent + report.cells.reduce((sum, c) => sum + c.duration_ms, 0);
}

export async function benchApp(): Promise<Record<string, number | string>> {
  return { ...(await webhookLatency()), ...(await demoWallTime()) };
}
