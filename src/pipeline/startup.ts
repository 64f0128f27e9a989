import Docker from 'dockerode';
import type { Logger } from 'pino';
import { lstat, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Config } from '../config/config.js';
import { isActive, type RunStore } from '../store/store.js';
import { dockerAvailable } from '../environment/docker.js';
import { forgetLent, isLent, restoreLentWorktrees, type Restored } from '../environment/lending.js';
import { checkBindMounts, checkRuntime, MountCheckError, sweepContainers } from '../environment/startup.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import { worktreeOverLimits } from '../workspace/tree.js';
import { runOfLabel } from './attempts.js';

/** What every entry point (serve, demo, run, verify, eval) does before its first run. */

export interface HostCleanup {
  containers: string[];
  restored_worktrees: string[];
  removed_worktrees: string[];
  /** Worktrees set aside, and why: they are removed in the background (the start-up does not wait). */
  quarantined_worktrees: { worktree: string; reason: string }[];
  retained: Retained;
}

export interface PrepareHostOptions {
  config: Config;
  /** The process's workspace manager (src/cli/compose.ts). */
  workspaces: GitWorkspaceManager;
  /** Runs use the Docker sandbox: sweep the engine (when one answers) and check the mounts. */
  docker: boolean;
  /** Prove that the engine sees the worktree dir (serve, run): a failure stops the program. */
  checkMounts?: boolean;
  /** Run ids known to be over (the app's store). */
  isFinished?: (runId: string) => Promise<boolean>;
  /** Run ids known to be going on (the app's store): retention spares their run directories. */
  isRunning?: (runId: string) => Promise<boolean>;
  /** Told when the background removal of quarantined worktrees ends. */
  log?: Pick<Logger, 'info' | 'warn'>;
}

/**
 * Checks that the engine has the configured runtime, tidies what dead runs left (their containers,
 * worktrees still lent to nobody), applies the worktree age policy and retention and, when asked, runs
 * the mount self-check; a failed check throws a ConfigError saying what to do.
 */
export async function prepareHost(o: PrepareHostOptions): Promise<HostCleanup> {
  const { config } = o;
  const docker = new Docker();
  const engine = o.docker && (await dockerAvailable(docker));
  if (engine) await checkRuntime(docker, config);
  // Containers first: a worktree is handed back only once nothing can write to it any more.
  const containers = engine ? await sweepContainers(docker, { isFinished: o.isFinished }) : [];
  const quarantined = await quarantineBadWorktrees(
    config,
    o.workspaces,
    await restoreLentWorktrees(config.worktreeDir),
    o.log,
  );
  const removed = await removeOldWorktrees(config, o.workspaces);
  // Quarantines and half clones of fetches a dead process left: the mirrors stay usable without them.
  const leftovers = await o.workspaces.removeFetchLeftovers();
  if (leftovers.length > 0) o.log?.info({ removed: leftovers }, 'leftovers of interrupted fetches removed');
  const retained = await applyRetention(config, o.isRunning);
  if (o.docker && o.checkMounts) {
    if (!engine) throw new ConfigError('no Docker engine answers (DOCKER_HOST or /var/run/docker.sock)');
    try {
      await checkBindMounts(docker, config);
    } catch (err) {
      if (err instanceof MountCheckError) throw new ConfigError(err.message);
      throw err;
    }
  }
  return {
    containers,
    restored_worktrees: quarantined.restored,
    removed_worktrees: removed,
    quarantined_worktrees: quarantined.set_aside,
    retained,
  };
}

/**
 * One bad worktree never stops a start-up. Those a dead process left lent that cannot be handed back,
 * and those handed back over the worktree limits or that cannot be measured (what the tests of a
 * killed run left), are set aside at once and removed in the background: the start-up goes on.
 */
async function quarantineBadWorktrees(
  config: Config,
  workspaces: GitWorkspaceManager,
  lent: Restored,
  log?: PrepareHostOptions['log'],
): Promise<{ restored: string[]; set_aside: HostCleanup['quarantined_worktrees'] }> {
  const bad = lent.failed.map((f) => ({ worktree: f.worktree, reason: `cannot be handed back: ${f.error}` }));
  const restored: string[] = [];
  for (const worktree of lent.restored) {
    const over = await worktreeOverLimits(worktree, config.limits);
    if (over) bad.push({ worktree, reason: over });
    else restored.push(worktree);
  }
  const setAside: HostCleanup['quarantined_worktrees'] = [];
  for (const b of bad)
    await workspaces.quarantine(b.worktree).then(
      async () => {
        await forgetLent(b.worktree);
        setAside.push(b);
      },
      // Not even a rename: left where it is, its marker kept for the next start-up.
      (err: unknown) => log?.warn({ err, worktree: b.worktree }, 'cannot set a bad worktree aside'),
    );
  void workspaces.removeQuarantined().then(
    (gone) => gone.length > 0 && log?.info({ removed: gone }, 'quarantined worktrees removed'),
    (err: unknown) => log?.warn({ err }, 'could not remove quarantined worktrees'),
  );
  return { restored, set_aside: setAside };
}

/**
 * Containers of finished runs and of gone processes, image leases included, whenever the engine
 * answers: run periodically (hostUpkeep), it clears what an engine that stopped mid-run kept (a run
 * could not release its lease) once the engine is back.
 */
export async function sweepEngine(isFinished?: (runId: string) => Promise<boolean>): Promise<string[]> {
  const docker = new Docker();
  return (await dockerAvailable(docker)) ? sweepContainers(docker, { isFinished }) : [];
}

/** How often a process that runs runs does its upkeep (and serve reconciles runs with the store). */
export const UPKEEP_MS = 60_000;
/** Retention is applied every RETENTION_TICKS upkeeps (hourly). */
export const RETENTION_TICKS = 60;

export interface UpkeepOptions {
  config: Config;
  /** Runs use the Docker sandbox: the engine is swept. */
  docker: boolean;
  isFinished: (runId: string) => Promise<boolean>;
  isRunning: (runId: string) => Promise<boolean>;
  log: Record<'info' | 'warn' | 'error', (obj: object, msg: string) => void>;
}

/**
 * One upkeep of a machine that runs runs (serve alone, each worker), `tick` counting from 1: the
 * engine swept each time, retention (run directories, mirrors) every RETENTION_TICKS. Never throws.
 */
export function hostUpkeep(o: UpkeepOptions, tick: number): void {
  if (o.docker)
    sweepEngine(o.isFinished).then(
      (removed) => removed.length > 0 && o.log.info({ removed }, 'containers of finished runs removed'),
      (err: unknown) => o.log.warn({ err }, 'could not sweep the engine'),
    );
  if (tick % RETENTION_TICKS === 0)
    applyRetention(o.config, o.isRunning).then(
      (retained) => o.log.info(retained, 'retention applied'),
      (err: unknown) => o.log.error({ err }, 'could not apply retention'),
    );
}

/** Whether the run behind an engine label or run directory (`<id>`, `<id>-verify`, `<id>-aN`) is going on. */
export const runGoingOn =
  (store: Pick<RunStore, 'get'>) =>
  async (label: string): Promise<boolean> => {
    const state = (await store.get(runOfLabel(label)))?.state;
    return state !== undefined && isActive(state);
  };

/** The age policy (AGENTICFIX_WORKTREE_MAX_AGE_H); worktrees lent to a container right now are spared. */
export function removeOldWorktrees(config: Config, workspaces: GitWorkspaceManager): Promise<string[]> {
  return workspaces.removeOlderThan(config.app.worktreeMaxAgeMs, isLent);
}

export interface Retained {
  run_dirs: string[];
  mirrors: string[];
}

/**
 * Retention (AGENTICFIX_RUNS_KEEP, _RUNS_MAX_AGE_D, _MIRROR_MAX_AGE_D): run directories beyond the
 * newest `runsKeep` or older than the age limit, and mirrors no worktree was made from, removed from
 * or fetched into for the mirror age limit (none has a worktree then). By modification time.
 */
export async function applyRetention(
  config: Config,
  /** Whether the run behind a run directory's name is still going (its directory is spared). */
  running: (name: string) => Promise<boolean> = async () => false,
  now = Date.now(),
): Promise<Retained> {
  const { runsKeep, runsMaxAgeMs, mirrorMaxAgeMs } = config.app.retention;
  const runs = await dirsByAge(config.runsDir);
  // A run has its own directory and its judge's (`<id>-verify`): RUNS_KEEP counts runs, newest first.
  const runOf = (dir: string) => path.basename(dir).replace(/-verify$/, '');
  const newest = [...new Set(runs.map((d) => runOf(d.path)))];
  const oldRuns: string[] = [];
  for (const d of runs)
    if (
      (newest.indexOf(runOf(d.path)) >= runsKeep || now - d.mtimeMs > runsMaxAgeMs) &&
      !(await running(runOf(d.path)))
    )
      oldRuns.push(d.path);
  for (const dir of oldRuns) await rm(dir, { recursive: true, force: true });
  const oldMirrors: string[] = [];
  for (const m of await dirsByAge(config.cacheDir)) {
    if (!m.path.endsWith('.git')) continue;
    const used = Math.max(
      m.mtimeMs,
      await mtime(path.join(m.path, 'worktrees')),
      await mtime(path.join(m.path, 'FETCH_HEAD')),
    );
    const worktrees = await readdir(path.join(m.path, 'worktrees')).catch(() => []);
    if (now - used > mirrorMaxAgeMs && worktrees.length === 0) oldMirrors.push(m.path);
  }
  for (const dir of oldMirrors) await rm(dir, { recursive: true, force: true });
  return { run_dirs: oldRuns, mirrors: oldMirrors };
}

/** The directories in `dir`, newest first. */
async function dirsByAge(dir: string): Promise<{ path: string; mtimeMs: number }[]> {
  const found: { path: string; mtimeMs: number }[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const p = path.join(dir, name);
    const st = await lstat(p).catch(() => null);
    if (st?.isDirectory()) found.push({ path: p, mtimeMs: st.mtimeMs });
  }
  return found.sort((a, b) => b.mtimeMs - a.mtimeMs);
}

const mtime = async (p: string): Promise<number> => (await lstat(p).catch(() => null))?.mtimeMs ?? 0;
