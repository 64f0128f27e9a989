import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Docker from 'dockerode';
import { execa } from 'execa';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { ImageLeases } from '../../../src/images/leases.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/**
 * Issue 9, item 6: runs broke each other's images. GC spared only images used by a container, so an
 * image a live run used between two test runs was removed by another run's cleanup, and the model was
 * told `No such image` mid-run. Every image and lease here carries run ids unique to this file.
 */
const ROOT = path.resolve(path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'), '..');
const engine = await needDocker();
const d = describeIf(engine);
const docker = new Docker();
const unique = `${process.pid}-${Date.now()}`;
const cfg: Config['sandbox'] = { ...loadConfig({}).sandbox, imageLeaseTtlMs: 3000 };
/** The cleanup that removed a live run's image: keep one image, none older than 0 ms. */
const ATTACKER: Config['sandbox'] = { ...cfg, imageKeep: 1, imageMaxAgeMs: 0 };
const runs: string[] = [];
const newRun = (name: string) => {
  const id = `lease-${name}-${unique}`;
  runs.push(id);
  return id;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const leasesOf = async (runId: string) =>
  (await ImageLeases.list(docker, 30_000)).filter((l) => l.run === runId);

/** Another AgenticFix process sharing the engine: the compiled builder, run by a separate node. */
const CHILD = `
import Docker from 'dockerode';
const { DockerEnvironmentBuilder } = await import(process.env.BUILDER_URL);
const a = JSON.parse(process.env.CHILD_ARGS);
const builder = new DockerEnvironmentBuilder(new Docker(), a.cfg);
if (a.gc) process.stdout.write(JSON.stringify(await builder.gc({ runId: a.gc })) + '\\n');
else {
  const r = await builder.build(a.build);
  process.stdout.write(JSON.stringify({ cache_hit: r.cache_hit, image_id: r.image_id }) + '\\n');
  setInterval(() => {}, 60_000); // holds its lease until killed
}
`;
const child = (args: Record<string, unknown>) =>
  execa(process.execPath, ['--input-type=module', '-e', CHILD], {
    cwd: ROOT,
    env: {
      BUILDER_URL: pathToFileURL(path.join(ROOT, 'dist/images/builder.js')).href,
      CHILD_ARGS: JSON.stringify(args),
    },
  });
const gcInOtherProcess = async (runId: string): Promise<string[]> =>
  JSON.parse((await child({ cfg: ATTACKER, gc: runId })).stdout) as string[];

let worktree: string;
const dockerfile = (name: string, extra = '') =>
  `FROM ${BASE_IMAGE}\nLABEL agenticfix.test=${name}-${unique}\n${extra}`;

beforeAll(async () => {
  worktree = mkdtempSync(path.join(tmpdir(), 'agenticfix-leases-'));
  writeFileSync(path.join(worktree, 'README'), 'lease fixture\n');
}, 180_000);

afterAll(async () => {
  rmSync(worktree, { recursive: true, force: true });
  if (!engine.ok) return; // nothing was built
  const sweep = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 0, imageMaxAgeMs: 0 });
  for (const runId of runs) {
    await sweep.release(runId);
    await sweep.gc({ runId });
  }
});

d('image leases (real engine, two processes)', () => {
  it('a cleanup between two test runs, in this process or another, cannot remove the image a live run uses; released, it is collected', async () => {
    const runA = newRun('a');
    const builder = new DockerEnvironmentBuilder(docker, cfg);
    const x = await builder.build({ dockerfile: dockerfile('a'), worktree, runId: runA });
    expect(x).toMatchObject({ success: true, cache_hit: false });
    const sandbox = builder.sandboxFor(x.image_id!, runA);
    const test = () => sandbox.run({ argv: ['true'], worktree, timeoutMs: 30_000, maxOutputBytes: 4096 });
    expect((await test()).status).toBe('passed');

    // The attack, as it happened: another run's cleanup between two test runs of run A.
    expect(await new DockerEnvironmentBuilder(docker, ATTACKER).gc({ runId: runA })).toEqual([]);
    expect(await gcInOtherProcess(runA)).toEqual([]);
    expect(await test()).toMatchObject({ status: 'passed', exit_code: 0 });
    const [lease] = await leasesOf(runA);
    expect(lease).toMatchObject({ image: x.image_id });

    // Its holder renews the lease: it outlives its TTL as long as the run does.
    await sleep(cfg.imageLeaseTtlMs * 2);
    expect(await gcInOtherProcess(runA)).toEqual([]);
    // A renewal replaces the lease container (for a moment there may be both).
    const renewed = await leasesOf(runA);
    expect(new Set(renewed.map((l) => l.image))).toEqual(new Set([x.image_id]));
    expect(renewed.length).toBeLessThanOrEqual(2);
    expect(renewed.map((l) => l.container)).not.toContain(lease!.container);
    expect(Math.max(...renewed.map((l) => l.expires))).toBeGreaterThan(Date.now());

    // The run ends: its image is an ordinary candidate again.
    await builder.release(runA);
    expect(await leasesOf(runA)).toEqual([]);
    expect(await gcInOtherProcess(runA)).toEqual([x.image_tag]);
    await expect(docker.getImage(x.image_id!).inspect()).rejects.toThrow(/no such image/i);
  });

  it("a wall clock that jumped forward (faults, second round): GC keeps a live holder's lease and image; released, they go", async () => {
    const run = newRun('jump');
    const builder = new DockerEnvironmentBuilder(docker, cfg);
    const x = await builder.build({ dockerfile: dockerfile('jump'), worktree, runId: run });
    expect(x.success).toBe(true);
    const dayLater = Date.now() + 86_400_000; // an NTP step, a VM resumed: every expiry is past
    const attacker = new DockerEnvironmentBuilder(docker, ATTACKER);
    expect(await attacker.gc({ runId: run, now: dayLater })).toEqual([]); // was: [the live run's image]
    expect(await leasesOf(run)).toHaveLength(1);
    await builder.release(run);
    expect(await attacker.gc({ runId: run, now: dayLater })).toEqual([x.image_tag]);
  });

  it("a worker releasing a run drops only its own leases of it: a newer owner's (requeue stalled) stay", async () => {
    const run = newRun('owners');
    const image = (await docker.getImage(BASE_IMAGE).inspect()).Id;
    const stale = new ImageLeases(docker, 3_600_000, 30_000, 'w1:1:1');
    const newer = new ImageLeases(docker, 3_600_000, 30_000, 'w2:2:2');
    await stale.acquire(run, image);
    await newer.acquire(run, image);
    expect(await leasesOf(run)).toHaveLength(2);
    await stale.release(run);
    // On the old code the stale worker's release dropped both: the newer attempt's image was open to GC.
    expect(await leasesOf(run)).toHaveLength(1);
    await newer.release(run);
    expect(await leasesOf(run)).toEqual([]);
  });

  it("another process's cache hit leases the image too; when that process is killed its lease expires and the image is collected", async () => {
    const runB = newRun('b');
    const holder = newRun('b-holder');
    const builder = new DockerEnvironmentBuilder(docker, cfg);
    const x = await builder.build({ dockerfile: dockerfile('b'), worktree, runId: runB });
    expect(x.success).toBe(true);
    await builder.release(runB);

    const proc = child({
      cfg: { ...cfg, imageLeaseTtlMs: 5000 },
      build: { dockerfile: dockerfile('b'), worktree, runId: holder },
    });
    const line = await new Promise<string>((resolve) => proc.stdout!.once('data', (b) => resolve(String(b))));
    expect(JSON.parse(line)).toEqual({ cache_hit: true, image_id: x.image_id });
    proc.kill('SIGKILL');
    await expect(proc).rejects.toMatchObject({ signal: 'SIGKILL' });

    // The holder is dead but its lease has not expired: the image stays.
    const attacker = new DockerEnvironmentBuilder(docker, ATTACKER);
    expect(await attacker.gc({ runId: runB })).toEqual([]);
    expect(await leasesOf(holder)).toHaveLength(1);
    // Nobody renews it: once expired, GC reclaims the lease and then the image.
    await sleep(5500);
    expect(await attacker.gc({ runId: runB })).toEqual([x.image_tag]);
    expect(await leasesOf(holder)).toEqual([]);
  });

  it('GC keeps the images under AGENTICFIX_IMAGE_MAX_GB by removing the oldest unleased ones', async () => {
    const runC = newRun('c');
    const holder = newRun('c-holder');
    const builder = new DockerEnvironmentBuilder(docker, cfg);
    const built = [];
    // Three images of about 3 MB each of their own (random bytes share no layer with anything).
    for (const n of [1, 2, 3])
      built.push(
        await builder.build({
          dockerfile: dockerfile(`c${n}`, 'RUN head -c 3000000 /dev/urandom > /blob\n'),
          worktree,
          runId: runC,
        }),
      );
    expect(built.every((b) => b.success)).toBe(true);
    await builder.release(runC);
    const [oldest, middle, newest] = built;
    // Another run is using the oldest one.
    const hit = await builder.build({
      dockerfile: dockerfile('c1', 'RUN head -c 3000000 /dev/urandom > /blob\n'),
      worktree,
      runId: holder,
    });
    expect(hit).toMatchObject({ cache_hit: true, image_id: oldest!.image_id });

    const capped = new DockerEnvironmentBuilder(docker, { ...cfg, imageMaxBytes: 7_000_000 });
    expect(await capped.gc({ runId: runC })).toEqual([middle!.image_tag]);
    // Under the cap now: nothing more goes.
    expect(await capped.gc({ runId: runC })).toEqual([]);
    await builder.release(holder);
    expect(await capped.gc({ runId: runC })).toEqual([]);
    const tiny = new DockerEnvironmentBuilder(docker, { ...cfg, imageMaxBytes: 4_000_000 });
    expect(await tiny.gc({ runId: runC })).toEqual([oldest!.image_tag]);
    await expect(docker.getImage(newest!.image_tag!).inspect()).resolves.toBeTruthy();
  });
});
