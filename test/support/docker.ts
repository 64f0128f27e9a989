import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config/config.js';
import { DockerSandbox } from '../../src/environment/docker.js';
import { engineRuntimes } from '../../src/environment/startup.js';

/**
 * Whether Docker-backed tests can run. In CI a missing engine is a failure, never a silent skip;
 * elsewhere the suite is skipped with a loud warning.
 */
export async function dockerReady(): Promise<boolean> {
  try {
    await new Docker().ping();
    return true;
  } catch (err) {
    if (process.env.CI) throw new Error(`Docker engine required in CI but not reachable: ${String(err)}`);
    console.warn(`\n!!! Docker engine not reachable: SKIPPING Docker tests (${String(err)}) !!!\n`);
    return false;
  }
}

export const BASE_IMAGE = process.env.AGENTICFIX_BASE_IMAGE ?? 'agenticfix/debian:bookworm';

/**
 * Whether the sandbox can run under gVisor (AGENTICFIX_RUNTIME=runsc) here: the engine lists the runsc
 * runtime and a run of the base image through DockerSandbox passes. Not being able to is a loud skip,
 * in CI too: `scripts/setup-docker.sh` only tries to register runsc, and some kernels refuse it.
 */
export async function runscReady(): Promise<boolean> {
  if (!(await dockerReady())) return false;
  const why = await runscRefusal(new Docker());
  if (why === null) return true;
  console.warn(`\n!!! gVisor (runsc) not usable: SKIPPING the runs under gVisor (${why}) !!!\n`);
  return false;
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
