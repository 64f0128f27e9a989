import Docker from 'dockerode';
import { ConfigError, type Config } from '../config/config.js';
import { dockerAvailable } from '../environment/docker.js';
import { isLent, restoreLentWorktrees } from '../environment/lending.js';
import { checkBindMounts, checkRuntime, MountCheckError, sweepContainers } from '../environment/startup.js';
import { GitWorkspaceManager } from '../workspace/manager.js';

/** What every entry point (serve, demo, run, verify, eval) does before its first run. */

export interface HostCleanup {
  containers: string[];
  restored_worktrees: string[];
  removed_worktrees: string[];
}

export interface PrepareHostOptions {
  config: Config;
  /** Runs use the Docker sandbox: sweep the engine (when one answers) and check the mounts. */
  docker: boolean;
  /** Prove that the engine sees the worktree dir (serve, run): a failure stops the program. */
  checkMounts?: boolean;
  /** Run ids known to be over (the app's store). */
  isFinished?: (runId: string) => Promise<boolean>;
}

/**
 * Checks that the engine has the configured runtime, tidies what dead runs left (their containers,
 * worktrees still lent to nobody), applies the worktree age policy and, when asked, runs the mount
 * self-check; a failed check throws a ConfigError saying what to do.
 */
export async function prepareHost(o: PrepareHostOptions): Promise<HostCleanup> {
  const { config } = o;
  const docker = new Docker();
  const engine = o.docker && (await dockerAvailable(docker));
  if (engine) await checkRuntime(docker, config);
  // Containers first: a worktree is handed back only once nothing can write to it any more.
  const containers = engine ? await sweepContainers(docker, { isFinished: o.isFinished }) : [];
  const restored = await restoreLentWorktrees(config.worktreeDir);
  const removed = await removeOldWorktrees(config);
  if (o.docker && o.checkMounts) {
    if (!engine) throw new ConfigError('no Docker engine answers (DOCKER_HOST or /var/run/docker.sock)');
    try {
      await checkBindMounts(docker, config);
    } catch (err) {
      if (err instanceof MountCheckError) throw new ConfigError(err.message);
      throw err;
    }
  }
  return { containers, restored_worktrees: restored, removed_worktrees: removed };
}

/** The age policy (AGENTICFIX_WORKTREE_MAX_AGE_H); worktrees lent to a container right now are spared. */
export function removeOldWorktrees(config: Config): Promise<string[]> {
  const workspaces = new GitWorkspaceManager({ cacheDir: config.cacheDir, worktreeDir: config.worktreeDir });
  return workspaces.removeOlderThan(config.app.worktreeMaxAgeMs, isLent);
}
