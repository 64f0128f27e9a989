import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig, loadEnv } from '../../../src/config/config.js';

describe('config', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({}, '/srv');
    expect(c.limits).toEqual({
      maxFileBytes: 1024 * 1024,
      maxReadLines: 400,
      maxTestTimeoutMs: 1_800_000,
      minTestTimeoutMs: 60_000,
      maxOutputBytes: 1024 * 1024,
      maxListEntries: 2000,
      maxScannedEntries: 20000,
      observationMaxChars: 12_000,
      maxWorktreeBytes: 1024 * 1024 * 1024,
      maxWorktreeEntries: 200_000,
      maxPatchFileBytes: 10 * 1024 * 1024,
      runCommandLocal: false,
      revisionMaxDiffBytes: 16 * 1024 * 1024,
      fetch: { timeoutMs: 600_000, maxBytes: 4096 * 1024 * 1024, maxFiles: 100_000 },
    });
    expect(loadConfig({ AGENTICFIX_RUN_COMMAND_LOCAL: 'true' }).limits.runCommandLocal).toBe(true);
    expect(c.cacheDir).toBe('/srv/.agenticfix/cache');
    expect(c.worktreeDir).toBe('/srv/.agenticfix/worktrees');
    expect(c.runsDir).toBe('/srv/runs');
    expect(c.budgets.tokens).toBe(150_000);
  });

  it('bounds builds and the reads of container-written files', () => {
    const MiB = 1024 * 1024;
    const c = loadConfig({});
    expect(c.sandbox).toMatchObject({ buildMaxOutputBytes: 64 * MiB, buildContextMaxBytes: 256 * MiB });
    expect(c.verify.maxReportBytes).toBe(32 * MiB);
    const set = loadConfig({ AGENTICFIX_BUILD_MAX_OUTPUT_MB: '8', AGENTICFIX_BUILD_CONTEXT_MAX_MB: '16' });
    expect(set.sandbox).toMatchObject({ buildMaxOutputBytes: 8 * MiB, buildContextMaxBytes: 16 * MiB });
    expect(() => loadConfig({ AGENTICFIX_BUILD_MAX_OUTPUT_MB: '0' })).toThrow(
      /AGENTICFIX_BUILD_MAX_OUTPUT_MB/,
    );
  });

  it('fails at start-up naming the invalid variable', () => {
    expect(() => loadConfig({ AGENTICFIX_MAX_READ_LINES: 'lots' })).toThrow(ConfigError);
    expect(() => loadConfig({ AGENTICFIX_MAX_READ_LINES: 'lots' })).toThrow(/AGENTICFIX_MAX_READ_LINES/);
    expect(() => loadConfig({ AGENTICFIX_MODEL_PROVIDER: 'nope' })).toThrow(/AGENTICFIX_MODEL_PROVIDER/);
  });

  it('sizes the image GC cap and the lease TTL', () => {
    expect(loadConfig({}).sandbox).toMatchObject({ imageMaxBytes: 20 * 1024 ** 3, imageLeaseTtlMs: 600_000 });
    const c = loadConfig({ AGENTICFIX_IMAGE_MAX_GB: '0.5', AGENTICFIX_IMAGE_LEASE_TTL_S: '60' });
    expect(c.sandbox).toMatchObject({ imageMaxBytes: 512 * 1024 ** 2, imageLeaseTtlMs: 60_000 });
    expect(() => loadConfig({ AGENTICFIX_IMAGE_MAX_GB: '0' })).toThrow(/AGENTICFIX_IMAGE_MAX_GB/);
    // Renewed every third of the TTL: shorter would churn containers.
    expect(() => loadConfig({ AGENTICFIX_IMAGE_LEASE_TTL_S: '5' })).toThrow(/AGENTICFIX_IMAGE_LEASE_TTL_S/);
  });

  it('keeps deliveries a week, and never less than GitHub redelivers (3 days)', () => {
    expect(loadConfig({}).app.retention.deliveryMaxAgeMs).toBe(7 * 86_400_000);
    expect(loadConfig({ AGENTICFIX_DELIVERY_MAX_AGE_D: '3' }).app.retention.deliveryMaxAgeMs).toBe(
      3 * 86_400_000,
    );
    expect(() => loadConfig({ AGENTICFIX_DELIVERY_MAX_AGE_D: '2' })).toThrow(/AGENTICFIX_DELIVERY_MAX_AGE_D/);
  });

  it('reads an optional .env file, real environment variables winning', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cfg-'));
    writeFileSync(path.join(dir, '.env'), 'AGENTICFIX_MAX_READ_LINES=10\nAGENTICFIX_MAX_FILE_BYTES=99\n');
    const env = loadEnv({ AGENTICFIX_MAX_FILE_BYTES: '77' }, dir);
    const c = loadConfig(env, dir);
    expect(c.limits.maxReadLines).toBe(10);
    expect(c.limits.maxFileBytes).toBe(77);
  });

  it('is one process with SQLite unless the shared store and queue are configured', () => {
    expect(loadConfig({})).toMatchObject({ databaseUrl: null, distributed: null });
    const db = 'postgres://u:p@db:5432/agenticfix';
    expect(loadConfig({ AGENTICFIX_DATABASE_URL: db })).toMatchObject({
      databaseUrl: db,
      databaseSchema: 'public',
      distributed: null,
    });
    expect(() => loadConfig({ AGENTICFIX_REDIS_URL: 'redis://q:6379' })).toThrow(
      /AGENTICFIX_REDIS_URL needs AGENTICFIX_DATABASE_URL/,
    );
    expect(() => loadConfig({ AGENTICFIX_DATABASE_URL: 'mysql://x/y' })).toThrow(ConfigError);
    const c = loadConfig({
      AGENTICFIX_DATABASE_URL: db,
      AGENTICFIX_REDIS_URL: 'redis://q:6379',
      AGENTICFIX_WORKER_ID: 'w1',
      AGENTICFIX_REQUEUE_STALLED: 'true',
    });
    expect(c.distributed).toEqual({
      redisUrl: 'redis://q:6379',
      queueName: 'agenticfix-runs',
      workerId: 'w1',
      workerLockMs: 30_000,
      requeueStalled: true,
      retry: { retries: 2, baseMs: 30_000 },
    });
  });
});

// Issue 39, item 5: plain copies are derived from the setting's name, converted by the unit it ends with.
describe('settings copied by name', () => {
  it('converts seconds, hours and days to ms and MiB to bytes, and copies the rest as the schema gives it', () => {
    const c = loadConfig({
      AGENTICFIX_MODEL_TIMEOUT_S: '7',
      AGENTICFIX_IMAGE_MAX_AGE_H: '2',
      AGENTICFIX_DELIVERY_MAX_AGE_D: '4',
      AGENTICFIX_SANDBOX_MEMORY_MB: '33',
      AGENTICFIX_GITHUB_TIMEOUT_MS: '150',
      AGENTICFIX_LABEL: 'fix-me',
      AGENTICFIX_RUN_COMMAND_LOCAL: 'yes',
    });
    expect(c.model.timeoutMs).toBe(7000);
    expect(c.sandbox.imageMaxAgeMs).toBe(7_200_000);
    expect(c.app.retention.deliveryMaxAgeMs).toBe(4 * 86_400_000);
    expect(c.sandbox.memoryBytes).toBe(33 * 1024 * 1024);
    expect(c.app.githubTimeoutMs).toBe(150);
    expect(c.app.label).toBe('fix-me');
    expect(c.limits.runCommandLocal).toBe(true);
    expect(c.agent).toEqual({ maxFormatErrors: 3, noEditNudges: 2, loopRepeat: 3 });
  });
});
