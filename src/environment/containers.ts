import path from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { gitLinkChanges, restoreGitLink, snapshotGitLink, type GitLinkSnapshot } from '../workspace/guard.js';
import { markLent } from '../workspace/stage.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import { parseTestSummary, statusFromExit } from '../testrunners/summary.js';
import { stopwatch } from '../trace/phases.js';
import type { CapturedOutput } from './capture.js';
import { processOwner, worktreeUser } from './lending.js';
import type { RunOutcome, RunRequest } from './types.js';

/**
 * What every test container shares, whether it runs one call (DockerSandbox: the judge's cells) or a
 * whole run's calls (WarmSandbox): labels, limits, mounts, and the checks around each run.
 */

/**
 * The root is read-only and tests run unprivileged: every place a runner or a tool caches or writes
 * temporary files by default points into the /tmp tmpfs.
 */
export const WRITABLE_ENV = ['HOME=/tmp', 'TMPDIR=/tmp', 'XDG_CACHE_HOME=/tmp/.cache'];
/** The environment of every process run in a test container. */
export const TEST_ENV = [...WRITABLE_ENV, 'LANG=C.UTF-8', 'CI=1'];
/** Label on everything AgenticFix creates in the engine, so leftovers can be found. */
export const LABEL = 'agenticfix';
export const RUN_LABEL = 'agenticfix.run';
/** The process that runs the container (`processOwner()`): a start-up removes those of dead processes. */
export const OWNER_LABEL = 'agenticfix.owner';
/** Epoch ms after which the container has ended on its own (its in-container deadline). */
export const DEADLINE_LABEL = 'agenticfix.deadline';

/**
 * The in-container deadline comes this long after the host's timer, so a live app still sees and
 * reports a timeout; the in-container deadline matters only when the app is gone.
 */
export const DEADLINE_GRACE_MS = 5000;

/**
 * A hung engine (a deadlocked dockerd still answers its ping) must not hold a run for ever: a call's
 * wait or output may outlast its in-container deadline by this much, and each request that answers at
 * once when the engine is well (create, start, kill, inspect, remove, list, an exec) is `answered`
 * within the sandbox's engineCallTimeoutMs (AGENTICFIX_ENGINE_CALL_TIMEOUT_S).
 */
export const ENGINE_LATE_MS = 10_000;

/** The engine did not answer in time: the run cannot go on, as when it has gone. */
export class EngineHung extends Error {}

/**
 * One engine request, abandoned (its connection closed) when the engine has not answered within `ms`.
 * A request dockerode cannot abort (an image inspection) is given up all the same. A stream it answers
 * with (attach, exec start, a build) is not cut afterwards.
 */
export async function answered<T>(
  what: string,
  request: (o: { abortSignal: AbortSignal }) => Promise<T>,
  ms: number,
): Promise<T> {
  const stop = new AbortController();
  const hung = () => new EngineHung(`the Docker engine did not answer ${what} within ${ms / 1000} s`);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    // Unref'd: a removal given up on is not waited for, and must not keep a one-shot command alive.
    timer = setTimeout(() => {
      stop.abort();
      reject(hung());
    }, ms).unref();
  });
  try {
    return await Promise.race([request({ abortSignal: stop.signal }), late]);
  } catch (err) {
    throw stop.signal.aborted ? hung() : err;
  } finally {
    clearTimeout(timer);
  }
}

/** How an outcome the sandbox, not the tests, caused begins its detail (the model and the evidence see it). */
export const INFRA = 'infrastructure error: ';

export const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Where the engine finds `p`: the engine mounts paths of its own host, so when the app runs in a
 * container, AGENTICFIX_HOME is translated to its host path (AGENTICFIX_HOST_HOME). Paths outside
 * AGENTICFIX_HOME stay as they are; the start-up self-check tells when the engine does not see them.
 */
export function hostPath(p: string, map: Config['sandbox']['hostHome']): string {
  if (!map) return p;
  const rel = path.relative(map.local, p);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return p;
  return path.posix.join(map.host, rel.split(path.sep).join('/'));
}

/** The labels that let a start-up find and remove a container its owner left behind. */
export function containerLabels(runId: string, deadlineMs: number): Record<string, string> {
  return {
    [LABEL]: '1',
    [RUN_LABEL]: runId,
    [OWNER_LABEL]: processOwner(),
    [DEADLINE_LABEL]: String(deadlineMs),
  };
}

/**
 * The worktree as the only writable mount. `.git` is bind-mounted read-only over it: as a mount point
 * it cannot be written, removed or replaced by a rename, so the tests cannot point it at a repository
 * of their own. Read-only rather than masked: nothing on the host has to be made or cleaned up per run,
 * and its content (a path the container cannot reach) tells the tests nothing useful. Host git does not
 * read it anyway (GIT_DIR is explicit); the check after each run catches any change all the same.
 */
export function worktreeBinds(worktree: string, hasGit: boolean, limits: Config['sandbox']): string[] {
  const binds = [`${hostPath(worktree, limits.hostHome)}:${CONTAINER_WORKTREE}:rw`];
  if (hasGit)
    binds.push(`${hostPath(path.join(worktree, '.git'), limits.hostHome)}:${CONTAINER_WORKTREE}/.git:ro`);
  return binds;
}

/**
 * The one place that sets a test container's limits: no network, no capabilities, no privilege
 * escalation, read-only root with a small writable /tmp, memory/CPU/pid limits, the binds as the only
 * other mounts. `none` alone, not NetworkDisabled: the container still gets loopback and an /etc/hosts
 * that names localhost (vitest, dev servers and many test suites resolve it).
 */
export function testHostConfig(
  limits: Config['sandbox'],
  binds: string[],
  extra: { Init?: boolean } = {},
): Docker.HostConfig {
  return {
    Binds: binds,
    NetworkMode: 'none',
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes, // equal: no swap on top of the memory limit
    NanoCpus: limits.nanoCpus,
    PidsLimit: limits.pidsLimit,
    ReadonlyRootfs: true,
    Tmpfs: { '/tmp': `rw,exec,nosuid,nodev,size=${limits.tmpfsBytes}` },
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    Privileged: false,
    AutoRemove: false, // removed by us: AutoRemove races with reading the exit state
    // gVisor: the container's system calls go to a kernel in user space, not the host's.
    ...(limits.runtime === 'runsc' ? { Runtime: 'runsc' } : {}),
    ...extra,
  };
}

/** The engine's container events since `sinceMs` that match `filters`, as JSON lines. */
async function eventLines(
  docker: Docker,
  since: number | string,
  filters: Record<string, string[]>,
): Promise<string[]> {
  const events = (await docker.getEvents({
    since: since as number, // the engine also takes `seconds.fraction`
    until: Math.ceil(Date.now() / 1000),
    filters: { type: ['container'], ...filters },
  })) as unknown as Readable;
  let text = '';
  for await (const chunk of events) text += String(chunk);
  return text.split('\n').filter((l) => l.trim());
}

/** Which of `actions` (kill, stop, oom…) the engine reported for container `id` since `sinceMs`. */
export async function engineEvents(
  docker: Docker,
  id: string,
  sinceMs: number,
  actions: readonly string[],
): Promise<Set<string>> {
  const seen = new Set<string>();
  const since = Math.floor(sinceMs / 1000) - 1; // a second early: the engine's clock is read in seconds
  for (const line of await eventLines(docker, since, { container: [id], event: [...actions] })) {
    const action = /"Action":"([a-z_]+)/.exec(line)?.[1];
    if (action && actions.includes(action)) seen.add(action);
  }
  return seen;
}

/** How many containers of run `runId` the engine started since `sinceMs` (its own record: tests, benchmarks). */
export async function containersStarted(docker: Docker, runId: string, sinceMs: number): Promise<number> {
  const since = (sinceMs / 1000).toFixed(3);
  const lines = await eventLines(docker, since, { event: ['start'], label: [`${RUN_LABEL}=${runId}`] });
  return new Set(lines.map((l) => /"id":"([0-9a-f]{64})"/.exec(l)?.[1])).size;
}

/**
 * After a run: a changed `.git` (or admin file) turns any outcome into an isolation error, and `.git` is
 * put back so the worktree stays usable for the run's record. A check that cannot be made counts as a change.
 */
async function checkIsolation(link: GitLinkSnapshot, result: RunOutcome): Promise<RunOutcome> {
  const changes = await gitLinkChanges(link).catch((err: unknown) => [`cannot check .git: ${message(err)}`]);
  if (changes.length === 0) return result;
  const restored = await restoreGitLink(link).then(
    (done) => (done ? '.git restored' : '.git left as found'),
    (err: unknown) => `.git not restored: ${message(err)}`,
  );
  const violation = `${changes.join('; ')} (${restored})`;
  return {
    ...result,
    status: 'error',
    detail: `isolation violated: ${violation}`,
    isolation_violation: violation,
  };
}

export type Outcome = (status: RunOutcome['status'], detail?: string) => RunOutcome;

/** What one container run gets from `lentRun`. */
export interface LentCall {
  cmd: string;
  args: string[];
  /** The worktree's owner, whom the tests run as (never root). */
  user: string;
  /** Whether the worktree has a `.git` to mount read-only. */
  hasGit: boolean;
  elapsed: () => number;
  outcome: Outcome;
}

/**
 * The frame of every container run: the `.git` snapshot, the worktree marked as lent (from then on
 * host git works on its stage only) and lent to an unprivileged user, `body`, the worktree handed back,
 * and the isolation check.
 */
export async function lentRun(
  req: RunRequest,
  body: (call: LentCall) => Promise<RunOutcome>,
): Promise<RunOutcome> {
  const elapsed = stopwatch();
  const outcome: Outcome = (status, detail) => ({
    exit_code: null,
    stdout: '',
    stderr: '',
    stdout_truncated: false,
    stderr_truncated: false,
    timed_out: false,
    duration_ms: elapsed(),
    status,
    summary: null,
    ...(detail ? { detail } : {}),
  });
  const [cmd, ...args] = req.argv;
  if (!cmd) return outcome('error', 'empty argv');
  if (req.signal?.aborted) return outcome('cancelled');

  let link: GitLinkSnapshot;
  let owner: Awaited<ReturnType<typeof worktreeUser>>;
  try {
    link = await snapshotGitLink(req.worktree);
    if (link.dotGit.kind === 'other') return outcome('error', "the worktree's .git is not a file");
    await markLent(req.worktree);
    owner = await worktreeUser(req.worktree);
  } catch (err) {
    return outcome('error', `worktree not accessible: ${message(err)}`);
  }
  let result: RunOutcome;
  try {
    const hasGit = link.dotGit.kind !== 'missing';
    result = await body({ cmd, args, user: owner.user, hasGit, elapsed, outcome });
  } finally {
    await owner.release();
  }
  return checkIsolation(link, result);
}

/** How one container run ended, as seen from the host. */
export interface Ended {
  /** The exit status of the command (of `timeout`, which passes it on). */
  status: number;
  out: CapturedOutput;
  err: CapturedOutput;
  /** Killed by the host's timer, or by the run's cancellation: no exit code. */
  timedOut: boolean;
  cancelled: boolean;
  oom: boolean;
  /** The engine killed or stopped the container (an operator, a daemon going down). */
  engineKilled: boolean;
}

/** The line that says the command itself could not be started (`timeout`'s, or the runtime's for an exec). */
const NOT_RUN = /^(?:timeout: (?:failed to run command|can't execute)|OCI runtime exec failed).*$/m;

/** The shell's word (dash, busybox) for a missing `timeout`, which enforces the deadline in the container. */
const NO_TIMEOUT = /^(?:\/bin\/)?sh: (?:\d+: )?timeout: not found$/m;
export const NO_TIMEOUT_WHY =
  'the image has no `timeout` (coreutils or busybox), which enforces the time limit in the container';

/** The outcome of a container run that ended, whichever sandbox ran it. */
export function endedOutcome(call: LentCall, e: Ended): RunOutcome {
  const killedByUs = e.timedOut || e.cancelled;
  const exitCode = killedByUs ? null : e.status;
  const oom = !killedByUs && e.oom;
  const text = `${e.out.text}\n${e.err.text}`;
  const notRun =
    exitCode !== null && exitCode >= 126 && exitCode <= 127
      ? NO_TIMEOUT.test(text)
        ? NO_TIMEOUT_WHY
        : NOT_RUN.exec(text)?.[0]
      : undefined;
  if (notRun) return call.outcome('error', `could not start ${call.cmd}: ${notRun}`);
  // A signal's exit status from a container the engine ended: the tests did not end it, so it is no test result.
  if (exitCode !== null && exitCode > 128 && e.engineKilled)
    return {
      ...call.outcome(
        'error',
        `${INFRA}the engine killed the container (exit ${exitCode}); this is no test result`,
      ),
      stdout: e.out.text,
      stderr: e.err.text,
    };
  return {
    exit_code: exitCode,
    stdout: e.out.text,
    stderr: e.err.text,
    stdout_truncated: e.out.truncated,
    stderr_truncated: e.err.truncated,
    timed_out: e.timedOut,
    duration_ms: call.elapsed(),
    status: e.cancelled ? 'cancelled' : oom ? 'error' : statusFromExit(exitCode, e.timedOut),
    summary: parseTestSummary(e.out.text, e.err.text),
    ...(oom ? { detail: 'killed: out of memory' } : {}),
  };
}
