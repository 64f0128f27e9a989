import pg from 'pg';
import { BullRunQueue, RunWorker } from '../queue/bullmq.js';
import { PostgresRunStore } from '../store/postgres-store.js';
import type { QueueHooks } from '../queue/queue.js';
import type { RunRecord } from '../store/store.js';
import type { BenchOptions } from './options.js';
import { benchScaleDemo } from './scale-demo.js';
import { pct, round } from './stats.js';

const WORKERS = 2;
const CONCURRENCY = 4;
const WORK_MS = 20;

/** A service URL: the app's variable, else the one scripts/setup-services.sh writes. */
const serviceUrl = (app: string, test: string): string | undefined => process.env[app] ?? process.env[test];

/**
 * The distributed queue alone, without Docker: RUNS runs of WORK_MS each through BullMQ on Redis and the
 * PostgreSQL store, WORKERS workers of CONCURRENCY, then CANCELS running runs cancelled (throughput,
 * enqueue-to-start and cancel-to-abort latencies, the most runs a worker ran at once); then the same
 * batch of demo runs with one worker process and with two (scale-demo.ts).
 */
export async function benchScale(o: BenchOptions): Promise<Record<string, number | string>> {
  const RUNS = o.smoke ? 10 : 200;
  const CANCELS = o.smoke ? 2 : 20;
  const redisUrl = serviceUrl('AGENTICFIX_REDIS_URL', 'AGENTICFIX_TEST_REDIS_URL');
  const databaseUrl = serviceUrl('AGENTICFIX_DATABASE_URL', 'AGENTICFIX_TEST_DATABASE_URL');
  if (!redisUrl || !databaseUrl)
    return {
      skipped:
        'set AGENTICFIX_REDIS_URL and AGENTICFIX_DATABASE_URL (or source the env file scripts/setup-services.sh writes)',
    };
  const tag = `bench_${process.pid}_${Date.now().toString(36)}`;
  const store = await PostgresRunStore.open({ url: databaseUrl, schema: tag, poolSize: 8 });
  const enqueuedAt = new Map<string, number>();
  const startLatency: number[] = [];
  const cancelledAt = new Map<string, number>();
  const cancelLatency: number[] = [];
  const mostRunning: number[] = [];
  const started = new Set<string>();

  const workers = Array.from({ length: WORKERS }, (_, w) => {
    let running = 0;
    mostRunning[w] = 0;
    const hooks: QueueHooks = {
      async execute(run: RunRecord, signal: AbortSignal) {
        startLatency.push(performance.now() - enqueuedAt.get(run.id)!);
        started.add(run.id);
        mostRunning[w] = Math.max(mostRunning[w]!, ++running);
        const long = run.issue > RUNS; // the runs that wait to be cancelled
        await new Promise<void>((resolve) => {
          const timer = long ? null : setTimeout(resolve, WORK_MS);
          signal.addEventListener('abort', () => {
            if (timer) clearTimeout(timer);
            if (cancelledAt.has(run.id)) cancelLatency.push(performance.now() - cancelledAt.get(run.id)!);
            resolve();
          });
        });
        running--;
        return { state: 'done' };
      },
    };
    return new RunWorker(store, hooks, {
      redisUrl,
      name: tag,
      concurrency: CONCURRENCY,
      id: `bench-${w}`,
    });
  });
  const queue = new BullRunQueue(store, {}, { redisUrl, name: tag });
  try {
    await Promise.all([queue.ready(), ...workers.map((w) => w.start())]);
    // Each run from a delivery recorded as the endpoint records it: workers run no other.
    const run = async (issue: number) => {
      const delivery = `${tag}-${issue}`;
      await store.claimDeliveries([{ id: delivery, event: 'issues', body: delivery, sha256: null }]);
      return store.createRun({
        owner: 'bench',
        repo: 'scale',
        issue,
        installation_id: 1,
        trigger: 'label',
        triggered_by: 'bench',
        delivery_id: delivery,
        base_commit: 'a'.repeat(40),
      });
    };
    const t0 = performance.now();
    for (let i = 1; i <= RUNS; i++) {
      const r = await run(i);
      enqueuedAt.set(r.id, performance.now());
      await queue.enqueue(r);
    }
    await queue.idle();
    const elapsed = performance.now() - t0;

    // Runs that only a cancel ends: the stop request has to reach the worker holding each.
    const long = [];
    for (let i = 1; i <= CANCELS; i++) {
      const r = await run(RUNS + i);
      enqueuedAt.set(r.id, performance.now());
      await queue.enqueue(r);
      long.push(r);
    }
    while (started.size < RUNS + Math.min(CANCELS, WORKERS * CONCURRENCY))
      await new Promise((r) => setTimeout(r, 10));
    for (const r of long) {
      cancelledAt.set(r.id, performance.now());
      await queue.cancel(r.owner, r.repo, r.issue, 'bench');
    }
    await queue.idle();
    const queueFigures = {
      queue_runs: RUNS,
      queue_workers: WORKERS,
      queue_concurrency_per_worker: CONCURRENCY,
      queue_work_ms: WORK_MS,
      queue_throughput_runs_per_s: round((RUNS / elapsed) * 1000),
      queue_start_latency_p50_ms: round(pct(startLatency.slice(0, RUNS), 50)),
      queue_start_latency_p99_ms: round(pct(startLatency.slice(0, RUNS), 99)),
      queue_cancel_to_abort_p50_ms: round(pct(cancelLatency, 50)),
      queue_cancel_to_abort_p99_ms: round(pct(cancelLatency, 99)),
      queue_cancelled_running: cancelLatency.length,
      queue_most_running_on_one_worker: Math.max(...mostRunning),
    };
    // The issue's figures: the same batch of demo runs with one worker and with two.
    return { ...(await benchScaleDemo(o.smoke ? 2 : 6, redisUrl, databaseUrl, o.smoke)), ...queueFigures };
  } finally {
    await Promise.all(workers.map((w) => w.close(0)));
    await queue.close();
    await store.close();
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${tag} CASCADE`);
    await admin.end();
  }
}
