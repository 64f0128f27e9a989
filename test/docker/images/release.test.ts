import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { RUN_LABEL } from '../../../src/environment/docker.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

const engine = await needDocker();
const docker = new Docker();
const cfg: Config['sandbox'] = { ...loadConfig({}).sandbox, memoryBytes: 128 * 1024 * 1024, pidsLimit: 64 };
const runId = `release-${process.pid}`;
const wt = mkdtempSync(path.join(tmpdir(), 'agenticfix-release-'));

afterAll(async () => {
  rmSync(wt, { recursive: true, force: true });
  if (!engine.ok) return;
  const gc = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 });
  await gc.release(runId).then(() => gc.gc({ runId }));
});

/**
 * The engine calls a builder makes, in order: listing containers, and the start and end of each removal
 * of a container it created (the run's warm container).
 */
function recorded(): { docker: Docker; calls: string[] } {
  const calls: string[] = [];
  const spy = new Proxy(docker, {
    get(target, prop) {
      if (prop === 'listContainers')
        return (o: Docker.ContainerListOptions) => (calls.push('list'), target.listContainers(o));
      if (prop === 'createContainer')
        return async (o: Docker.ContainerCreateOptions) => {
          const c = await target.createContainer(o);
          const remove = c.remove.bind(c);
          c.remove = (async (opts?: object) => {
            calls.push('remove warm');
            await remove(opts);
            calls.push('warm removed');
          }) as typeof c.remove;
          return c;
        };
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { docker: spy, calls };
}

describeIf(engine)("a run's release (issue 40)", () => {
  it('ends its image leases while its warm container is being removed, not after', async () => {
    writeFileSync(path.join(wt, 'a.txt'), 'a\n');
    if (process.getuid?.() === 0) execFileSync('chown', ['-R', '1000:1000', wt]);
    const { docker: spy, calls } = recorded();
    const builder = new DockerEnvironmentBuilder(spy, cfg);
    const built = await builder.build({ dockerfile: `FROM ${BASE_IMAGE}\n`, worktree: wt, runId });
    if (!built.success || !built.image_id) throw new Error(`build failed: ${JSON.stringify(built.log)}`);
    const sandbox = builder.runSandboxFor(built.image_id, runId);
    expect(
      (await sandbox.run({ argv: ['true'], worktree: wt, timeoutMs: 20_000, maxOutputBytes: 4096 })).status,
    ).toBe('passed');
    calls.length = 0;
    await builder.release(runId);
    // Before, the leases were listed (to be removed) only once the warm container was gone.
    expect(calls.indexOf('list')).toBeGreaterThanOrEqual(0);
    expect(calls.indexOf('list')).toBeLessThan(calls.indexOf('warm removed'));
    const left = await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`] } });
    expect(left).toEqual([]);
  }, 120_000);
});
