import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { BullRunQueue, RunWorker } from '../../../src/queue/bullmq.js';
import { openStore } from '../../../src/store/open-store.js';
import type { RunRecord, RunStore } from '../../../src/store/store.js';
import { needService, serviceUrl } from '../../support/services.js';
import { needPostgresBinaries, PrivatePostgres } from '../../support/private-postgres.js';
import { describeIf, needAll } from '../../support/skip.js';
import { newRun, recordedRun, until } from '../../support/queue-contract.js';

const redis = serviceUrl('AGENTICFIX_TEST_REDIS_URL');

/**
 * Issue 37, item 2: PostgreSQL down for 60 s left a run `running` forever, its issue showing
 * "Verifying": the worker's write back to `queued` failed and its BullMQ job completed anyway. Here
 * PostgreSQL is a cluster of the test's own, killed (immediate stop: connections cut, as a crash) and
 * started again. The outages are seconds, not 60 s: what decides the outcome is the outage's length
 * against AGENTICFIX_STORE_RETRY_S (300 s by default), set here to a few seconds, and the mechanism is
 * the same at any length.
 */
describeIf(needAll(needService('AGENTICFIX_TEST_REDIS_URL'), needPostgresBinaries()))(
  'a PostgreSQL outage',
  () => {
    let pg: PrivatePostgres;
    const lines: [string, string][] = [];
    const log = {
      warn: (_: object, msg: string) => lines.push(['warn', msg]),
      info: (_: object, msg: string) => lines.push(['info', msg]),
    };
    const open = (retryS: number): Promise<RunStore> =>
      openStore(
        {
          dbPath: ':memory:',
          databaseUrl: pg.url,
          databaseSchema: `outage_${randomUUID().replace(/-/g, '')}`,
          app: { storeRetryMs: retryS * 1000 },
        },
        log,
      );

    beforeAll(async () => {
      pg = await PrivatePostgres.create();
    }, 60_000);
    afterAll(async () => {
      await pg?.destroy();
    });
    beforeEach(() => {
      lines.length = 0;
    });

    it('is waited out by a run-state write, and logged once when it begins and once when it ends', async () => {
      const store = await open(30);
      try {
        const run = await recordedRun(store, newRun(1));
        await pg.kill();
        const write = store.update(run.id, { state: 'running' });
        await until('the outage logged', () => lines.length > 0, 10_000);
        await new Promise((r) => setTimeout(r, 2000)); // down for a while, several tries
        await pg.start();
        expect(await write).toMatchObject({ id: run.id, state: 'running' });
        expect(lines).toEqual([
          ['warn', 'postgresql unreachable'],
          ['info', 'postgresql reachable again'],
        ]);
      } finally {
        await pg.start().catch(() => undefined); // already up when the test passed
        await store.close();
      }
    }, 60_000);

    it("longer than the store's patience: the job fails (never completes with its run running) and serve ends the run interrupted, naming the store", async () => {
      const store = await open(1);
      const name = `outage-${randomUUID()}`;
      const redisUrl = redis!.toString();
      const started: string[] = [];
      // The case: an infrastructure failure puts the run back to `queued` for another try, and
      // that write fails with PostgreSQL down.
      const hooks = {
        async execute(run: RunRecord): Promise<never> {
          started.push(run.id);
          await pg.kill();
          throw new Error('engine down');
        },
      };
      const retry = { retries: 1, baseMs: 100 };
      const serve = new BullRunQueue(store, {}, { redisUrl, name, retry });
      const worker = new RunWorker(store, hooks, { redisUrl, name, concurrency: 1, lockMs: 2000, id: 'w1' });
      let restarted: BullRunQueue | null = null;
      const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      const jobs = new Queue(name, { connection });
      try {
        await Promise.all([serve.ready(), worker.start()]);
        const run = await recordedRun(store, newRun(2));
        await serve.enqueue(run);
        // Its job is given up (both attempts: the second cannot even read the run), never completed.
        // The job is added after enqueue returns (serve announces the run first): none yet is no failure.
        const job = async () => (await jobs.getJob(run.id))!;
        await until(
          'the job failed for good',
          async () => (await (await jobs.getJob(run.id))?.getState()) === 'failed',
          20_000,
        );
        expect((await job()).failedReason).toMatch(/^the store was unreachable: /);
        await pg.start();
        expect(await store.get(run.id)).toMatchObject({ state: 'running' });
        // Serve restarted (or its periodic reconcile): the run ends, and its issue is told why.
        const told: RunRecord[] = [];
        await serve.close();
        restarted = new BullRunQueue(
          store,
          { onInterrupted: (r) => told.push(r) },
          { redisUrl, name, retry },
        );
        await restarted.ready();
        const final = await store.get(run.id);
        expect(final).toMatchObject({
          state: 'interrupted',
          stop_reason: 'interrupted',
          error: expect.stringMatching(/^its worker \(w1\) gave it up: the store was unreachable: /),
        });
        expect(final!.finished_at).not.toBeNull();
        expect(told.map((r) => r.id)).toEqual([run.id]);
        // One final state: nothing runs it again, and a later reconcile leaves it as it is.
        expect(await restarted.reconcile()).toEqual([]);
        expect(started).toEqual([run.id]);
        expect((await store.get(run.id))!.state).toBe('interrupted');
        expect(lines.filter(([, m]) => m === 'postgresql unreachable').length).toBeGreaterThan(0);
      } finally {
        await pg.start().catch(() => undefined);
        await worker.close(0);
        await (restarted ?? serve).close().catch(() => undefined);
        await jobs.close();
        connection.disconnect();
        await store.close();
      }
    }, 60_000);
  },
);
