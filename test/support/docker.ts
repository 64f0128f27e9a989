import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config/config.js';
import { DockerSandbox } from '../../src/environment/docker.js';
import { engineRuntimes } from '../../src/environment/startup.js';
import { missing, needAll, present, type Need } from './skip.js';

/** The Docker engine, for `describeIf`/`itIf` (support/skip.ts): in CI its absence is a failure. */
export async function needDocker(): Promise<Need> {
  try {
    await new Docker().ping();
    return present('the Docker engine');
  } catch (err) {
    return missing('the Docker engine', `not reachable: ${String(err)}`);
  }
}

export const BASE_IMAGE = process.env.AGENTICFIX_BASE_IMAGE ?? 'agenticfix/debian:bookworm';

/**
 * The sandbox under gVisor (AGENTICFIX_RUNTIME=runsc): the engine lists the runsc runtime and a run of the
 * base image through DockerSandbox passes. Not being able to is a loud skip, in CI too:
 * `scripts/setup-docker.sh` only tries to register runsc, and some kernels refuse it.
 */
export async function needRunsc(): Promise<Need> {
  const what = 'gVisor (runsc)';
  const engine = await needDocker();
  if (engine.missing !== null) return needAll(engine, present(what));
  const why = await runscRefusal(new Docker());
  return why === null ? present(what) : missing(what, why, 'skip');
}

async function runscRefusal(docker: Docker): Promise<string | null> {
  const runtimes = await engineRuntimes(docker);
  if (!runtimes.includes('runsc'))
    return `the engine has no runsc runtime (it has: ${runtimes.join(', ')}); scripts/setup-docker.sh registers it`;
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-runsc-probe-'));
  try {
    const sandbox = new DockerSandbox(
      docker,
      BASE_IMAGE,
      { ...loadConfig({}).sandbox, runtime: 'runsc' },
      'runsc-probe',
    );
    const out = await sandbox.run({ argv: ['true'], worktree: dir, timeoutMs: 60_000, maxOutputBytes: 4096 });
    return out.status === 'passed'
      ? null
      : `a run of ${BASE_IMAGE} under runsc ended ${out.status} (exit ${out.exit_code}): ${(out.detail ?? out.stderr).slice(0, 300)}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The default bridge's gateway: where a container reaches a listener of the host. The engine names it in
 * the bridge's IPAM config, except when it adopted an existing docker0 (a restarted dockerd): then it is
 * the subnet's first address, as the engine assigns it.
 */
export async function bridgeGateway(docker = new Docker()): Promise<string> {
  const bridge = (await docker.getNetwork('bridge').inspect()) as {
    IPAM: { Config?: { Gateway?: string; Subnet?: string }[] };
  };
  const config = bridge.IPAM.Config?.[0];
  if (config?.Gateway) return config.Gateway;
  const net = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/\d+$/.exec(config?.Subnet ?? '');
  if (!net)
    throw new Error(
      `the default bridge names neither a gateway nor an IPv4 subnet: ${JSON.stringify(config)}`,
    );
  return `${net[1]}.${net[2]}.${net[3]}.${Number(net[4]) + 1}`;
}
