import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { z } from 'zod';
import { ConfigError, type Config } from '../config/config.js';
import { DEADLINE_LABEL, DockerSandbox, LABEL, OWNER_LABEL, RUN_LABEL } from './docker.js';
import { ownerState } from './lending.js';
import { removeStage } from '../workspace/stage.js';

/** What the app checks and tidies on the engine before it runs anything. */

/**
 * A container this long past its own deadline is a leftover whoever owns it: a live owner's host timer
 * would have removed it long before.
 */
const STALE_AFTER_DEADLINE_MS = 60_000;

/**
 * Removes test containers left by runs that are no longer alive: those of a process of this host
 * that is gone (OWNER_LABEL), those of runs `isFinished` knows to be over (the app's run store), and
 * any that outlived their deadline by a minute, unless their owner lives. Containers without our labels
 * are never touched.
 */
export async function sweepContainers(
  docker: Docker,
  opts: { isFinished?: (runId: string) => Promise<boolean>; now?: number } = {},
): Promise<string[]> {
  const now = opts.now ?? Date.now();
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL}=1`] } });
  const removed: string[] = [];
  for (const c of list) {
    const labels = c.Labels ?? {};
    const run = labels[RUN_LABEL];
    const deadline = Number(labels[DEADLINE_LABEL]);
    const owner = ownerState(labels[OWNER_LABEL]);
    // A live owner ends its containers on its own (monotonic) timers: a wall clock that jumped forward
    // must not put a running call's container past its deadline.
    const leftover =
      owner === 'dead' ||
      (run !== undefined && (await opts.isFinished?.(run)) === true) ||
      (owner !== 'alive' &&
        Number.isFinite(deadline) &&
        deadline > 0 &&
        now > deadline + STALE_AFTER_DEADLINE_MS);
    if (!leftover) continue;
    const ok = await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .then(() => true)
      .catch(() => false);
    if (ok) removed.push(c.Id);
  }
  return removed;
}

/** The part of `docker info` read here; the engine sends many more fields, which are dropped. */
const EngineInfo = z.object({ Runtimes: z.record(z.string(), z.unknown()).default({}) });

/** The OCI runtimes the engine has registered (`docker info`, Runtimes). */
export async function engineRuntimes(docker: Docker): Promise<string[]> {
  return Object.keys(EngineInfo.parse(await docker.info()).Runtimes);
}

/**
 * AGENTICFIX_RUNTIME=runsc on an engine that does not know runsc would fail every test container:
 * the start-up stops instead, with one line saying what to do.
 */
export async function checkRuntime(docker: Docker, config: Config): Promise<void> {
  const wanted = config.sandbox.runtime;
  if (wanted === 'runc') return;
  const names = await engineRuntimes(docker);
  if (names.includes(wanted)) return;
  throw new ConfigError(
    `AGENTICFIX_RUNTIME=${wanted} but the Docker engine has no "${wanted}" runtime (it has: ${names.join(', ') || 'none'}): install runsc and register it with dockerd in /etc/docker/daemon.json (docs/operating.md, "gVisor"), or unset AGENTICFIX_RUNTIME`,
  );
}

export class MountCheckError extends Error {
  override name = 'MountCheckError';
}

/**
 * Proves that the engine sees the worktree directory as this process does: writes a file there and
 * reads it back through a container of the base image (no network, the sandbox's own settings). When
 * the app runs in a container, the engine mounts *host* paths, so AGENTICFIX_HOME must be a volume at
 * the same path on the host, or AGENTICFIX_HOST_HOME must name its host path.
 */
export async function checkBindMounts(docker: Docker, config: Config): Promise<void> {
  const token = randomBytes(16).toString('hex');
  const dir = path.join(config.worktreeDir, `.mount-check-${token.slice(0, 8)}`);
  await mkdir(dir, { recursive: true });
  try {
    await writeFile(path.join(dir, 'probe'), token);
    const sandbox = new DockerSandbox(docker, config.sandbox.baseImage, config.sandbox, 'mount-check');
    const out = await sandbox.run({
      argv: ['cat', 'probe'],
      worktree: dir,
      timeoutMs: 60_000,
      maxOutputBytes: 4096,
    });
    if (out.status === 'passed' && out.stdout.trim() === token) return;
    const seen = out.detail ?? (out.stderr.trim() || out.stdout.trim() || `exit ${out.exit_code}`);
    const mapping = config.sandbox.hostHome
      ? `AGENTICFIX_HOST_HOME=${config.sandbox.hostHome.host} is not the host path of AGENTICFIX_HOME (${config.sandbox.hostHome.local})`
      : `the engine does not see ${config.worktreeDir} at the same path`;
    throw new MountCheckError(
      [
        `start-up check failed: a file written to ${dir} could not be read back through a container of ${config.sandbox.baseImage} (${seen.slice(0, 300)}).`,
        `Test containers bind-mount worktrees by their path on the Docker host, and ${mapping}.`,
        'When the app runs in a container, mount a host directory at AGENTICFIX_HOME under the same path',
        '(docker run -v /srv/agenticfix:/srv/agenticfix -e AGENTICFIX_HOME=/srv/agenticfix …), or set',
        'AGENTICFIX_HOST_HOME to the host directory mounted at AGENTICFIX_HOME; keep AGENTICFIX_WORKTREE_DIR',
        `inside AGENTICFIX_HOME. The base image must exist too (scripts/base-image.sh).`,
        ...(config.sandbox.runtime === 'runsc'
          ? [
              `Under AGENTICFIX_RUNTIME=runsc gVisor itself may refuse to start: try`,
              `docker run --rm --runtime=runsc --network=none ${config.sandbox.baseImage} true`,
            ]
          : []),
      ].join('\n'),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await removeStage(dir); // the mark the sandbox left beside it (it was lent to a container)
  }
}
