import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { SqliteRunStore } from '../../../src/store/sqlite-store.js';
import { startBull } from '../../support/bull.js';
import { Jobs, newRun, recordedRun, until } from '../../support/queue-contract.js';
import { needService } from '../../support/services.js';
import { describeIf } from '../../support/skip.js';

/**
 * Faults, second round: Redis killed (SIGKILL) and restarted empty while a worker holds a run, as a
 * Redis without persistence comes back. A Redis of the test's own on a free port: the shared one is
 * never stopped.
 */

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

describeIf(needService('AGENTICFIX_TEST_REDIS_URL'))('Redis restarted empty under a worker', () => {
  let dir: string;
  let redis: ResultPromise | null = null;
  const start = (port: number) => {
    redis = execa(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { reject: false },
    );
  };
  beforeAll(() => void (dir = mkdtempSync(path.join(tmpdir(), 'redis-restart-'))));
  afterAll(() => {
    redis?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('the held run ends recorded; the worker takes the next run once Redis is back', async () => {
    const port = await freePort();
    start(port);
    const redisUrl = `redis://127.0.0.1:${port}`;
    await until(
      'redis up',
      async () =>
        (await execa('redis-cli', ['-p', String(port), 'ping'], { reject: false })).stdout === 'PONG',
    );
    const store = new SqliteRunStore(':memory:');
    const jobs = new Jobs();
    const bull = await startBull(store, { redisUrl, workers: [{ hooks: jobs }] });
    try {
      const first = await recordedRun(store, newRun(1));
      await bull.queue.enqueue(first);
      await until('the first run taken', () => jobs.started.length === 1);

      redis!.kill('SIGKILL');
      await redis;
      await new Promise((r) => setTimeout(r, 1500));
      start(port);
      await until(
        'redis back',
        async () =>
          (await execa('redis-cli', ['-p', String(port), 'ping'], { reject: false })).stdout === 'PONG',
      );

      jobs.finish(first.id);
      await until(
        'the first run recorded',
        async () => (await store.get(first.id))?.state === 'done',
        20_000,
      );

      const second = await recordedRun(store, newRun(2));
      await bull.queue.enqueue(second);
      await until('the second run taken', () => jobs.started.length === 2, 20_000);
      jobs.finish(second.id);
      await until(
        'the second run recorded',
        async () => (await store.get(second.id))?.state === 'done',
        20_000,
      );
    } finally {
      await bull.close();
      await store.close();
    }
  }, 60_000);
});
