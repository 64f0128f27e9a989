import path from 'node:path';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { gitLinkChanges, restoreGitLink, snapshotGitLink, type GitLinkSnapshot } from '../workspace/guard.js';
import { OutputCapture } from './capture.js';
import { processOwner, worktreeUser } from './lending.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import { parseTestSummary, statusFromExit } from '../testrunners/summary.js';
import type { RunOutcome, RunRequest, Sandbox } from './types.js';
import { stopwatch } from '../trace/phases.js';
import { markLent } from '../workspace/stage.js';

/**
 * The root is read-only and tests run unprivileged: every place a runner or a tool caches or writes
 * temporary files by default points into the /tmp tmpfs.
 */
export const WRITABLE_ENV = ['HOME=/tmp', 'TMPDIR=/tmp', 'XDG_CACHE_HOME=/tmp/.cache'];
export { FALLBACK_USER } from './lending.js';
/** Label on everything AgenticFix creates in the engine, so leftovers can be found. */
export const LABEL = 'agenticfix';
export const RUN_LABEL = 'agenticfix.run';
/** The process that runs the container (`processOwner()`): a start-up removes those of dead processes. */
export const OWNER_LABEL = 'agenticfix.owner';
/** Epoch ms after which the container has ended on its own (its in-container deadline). */
export const DEADLINE_LABEL = 'agenticfix.deadline';

/**
 * The container's own deadline comes this long after the host's timer, so a live app still sees and
 * reports a timeout; the container's deadline matters only when the app is gone.
 */
const DEADLINE_GRACE_MS = 5000;

/** How long to keep reading output after the container exited (the attach stream ends on its own). */
const DRAIN_MS = 2000;

/** How often the engine is pinged while a container runs (a wait on a dropped connection never settles). */
const ENGINE_POLL_MS = 2000;

/** Whether a Docker engine answers. Never throws. */
export async function dockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the engine has gone (after a failure): it does not answer a ping within `ms`. What failed
 * then is no fault of the tests or the Dockerfile, and the run cannot go on.
 */
export async function engineGone(docker: Docker, ms = 5000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const up = await Promise.race([dockerAvailable(docker), late]).finally(() => clearTimeout(timer));
  return !up;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

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

/** How an outcome the sandbox, not the tests, caused begins its detail (the model and the evidence see it). */
export const INFRA = 'infrastructure error: ';

/** Whether the engine was asked to kill or stop the container since `sinceMs` (docker kill / stop). */
async function killedByEngine(docker: Docker, id: string, sinceMs: number): Promise<boolean> {
  const events = (await docker.getEvents({
    since: Math.floor(sinceMs / 1000) - 1,
    until: Math.ceil(Date.now() / 1000),
    filters: { container: [id], event: ['kill', 'stop'] },
  })) as unknown as Readable;
  let text = '';
  for await (const chunk of events) text += String(chunk);
  return text.trim().length > 0;
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

/**
 * Runs a test argv in a fresh container of a model-built image: no network, no capabilities,
 * no privilege escalation, read-only root with a small writable /tmp, memory/CPU/pid limits, the
 * worktree as the only writable mount (its `.git` read-only, checked after the run), a wall-clock
 * timeout and capped output. The container is always force-removed afterwards (no AutoRemove, which
 * races with reading its exit state).
 */
export class DockerSandbox implements Sandbox {
  readonly kind = 'docker' as const;

  constructor(
    private readonly docker: Docker,
    readonly imageId: string,
    private readonly limits: Config['sandbox'],
    private readonly runId = 'none',
  ) {}

  describe(): Record<string, unknown> {
    return {
      kind: this.kind,
      image: this.imageId,
      network: 'none',
      runtime: this.limits.runtime,
      memory_bytes: this.limits.memoryBytes,
      nano_cpus: this.limits.nanoCpus,
      pids_limit: this.limits.pidsLimit,
      tmpfs_bytes: this.limits.tmpfsBytes,
    };
  }

  async available(): Promise<boolean> {
    try {
      await this.docker.getImage(this.imageId).inspect();
      return true;
    } catch (err) {
      // Only "no such image" means gone; any other engine error shows up, with its message, in the run.
      return (err as { statusCode?: number }).statusCode !== 404;
    }
  }

  /**
   * The container's exit status. docker-modem never settles a wait (nor ends the output stream) whose
   * connection the engine dropped as it went away: the run hung there. The engine is pinged meanwhile,
   * and a wait outlives it by one ping at most.
   */
  private async exitOf(container: Docker.Container): Promise<{ StatusCode: number }> {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const gone = new Promise<never>((_, reject) => {
      const check = async () => {
        const down = await engineGone(this.docker);
        if (settled) return;
        if (down) reject(new Error('the Docker engine stopped answering'));
        else timer = setTimeout(() => void check(), ENGINE_POLL_MS);
      };
      timer = setTimeout(() => void check(), ENGINE_POLL_MS);
    });
    try {
      return await Promise.race([container.wait() as Promise<{ StatusCode: number }>, gone]);
    } finally {
      settled = true;
      clearTimeout(timer);
    }
  }

  /** A failed outcome, marked when the engine has gone meanwhile. */
  private async gone(o: RunOutcome): Promise<RunOutcome> {
    return (await engineGone(this.docker)) ? { ...o, engine_gone: true } : o;
  }

  async run(req: RunRequest): Promise<RunOutcome> {
    const elapsed = stopwatch();
    const outcome = (status: RunOutcome['status'], detail?: string): RunOutcome => ({
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
      await markLent(req.worktree); // from now on host git works on its stage only
      owner = await worktreeUser(req.worktree);
    } catch (err) {
      return outcome('error', `worktree not accessible: ${message(err)}`);
    }
    let result: RunOutcome;
    try {
      result = await this.runAs(owner.user, cmd, args, req, elapsed, outcome, link);
    } finally {
      await owner.release();
    }
    return checkIsolation(link, result);
  }

  private async runAs(
    user: string,
    cmd: string,
    args: string[],
    req: RunRequest,
    elapsed: () => number,
    outcome: (status: RunOutcome['status'], detail?: string) => RunOutcome,
    link: GitLinkSnapshot,
  ): Promise<RunOutcome> {
    const deadlineS = Math.ceil((req.timeoutMs + DEADLINE_GRACE_MS) / 1000);
    const binds = [`${hostPath(req.worktree, this.limits.hostHome)}:${CONTAINER_WORKTREE}:rw`];
    // `.git` is bind-mounted read-only over the writable worktree: as a mount point it cannot be
    // written, removed or replaced by a rename, so the tests cannot point it at a repository of their
    // own. Read-only rather than masked: nothing on the host has to be made or cleaned up per run, and
    // its content (a path the container cannot reach) tells the tests nothing useful. Host git does not
    // read it anyway (GIT_DIR is explicit); the check after the run catches any change all the same.
    if (link.dotGit.kind !== 'missing')
      binds.push(
        `${hostPath(path.join(req.worktree, '.git'), this.limits.hostHome)}:${CONTAINER_WORKTREE}/.git:ro`,
      );
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        Image: this.imageId,
        // The argv is run as given, never through a shell or an ENTRYPOINT the model wrote, under
        // `timeout` as PID 1: the container ends at its deadline even when this process is gone (killed
        // while the tests run). Docker has no lifetime limit of its own; `timeout` is in every Debian and
        // Ubuntu image (coreutils is essential) and in Alpine's busybox, with the same syntax. An image
        // without one fails to start (fail closed, the message says why) rather than run unbounded; an
        // image that fakes it is still removed by the next start-up (DEADLINE_LABEL, OWNER_LABEL).
        Entrypoint: ['timeout', '-s', 'KILL', String(deadlineS), cmd],
        Cmd: args,
        WorkingDir: CONTAINER_WORKTREE,
        User: user,
        Env: [...WRITABLE_ENV, 'LANG=C.UTF-8', 'CI=1'],
        Labels: {
          [LABEL]: '1',
          [RUN_LABEL]: this.runId,
          [OWNER_LABEL]: processOwner(),
          [DEADLINE_LABEL]: String(Date.now() + deadlineS * 1000),
        },
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        // `none` alone, not NetworkDisabled: the container still gets loopback and an /etc/hosts that
        // names localhost (vitest, dev servers and many test suites resolve it).
        HostConfig: {
          Binds: binds,
          NetworkMode: 'none',
          Memory: this.limits.memoryBytes,
          MemorySwap: this.limits.memoryBytes, // equal: no swap on top of the memory limit
          NanoCpus: this.limits.nanoCpus,
          PidsLimit: this.limits.pidsLimit,
          ReadonlyRootfs: true,
          Tmpfs: { '/tmp': `rw,exec,nosuid,nodev,size=${this.limits.tmpfsBytes}` },
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          Privileged: false,
          AutoRemove: false,
          // gVisor: the container's system calls go to a kernel in user space, not the host's.
          ...(this.limits.runtime === 'runsc' ? { Runtime: 'runsc' } : {}),
        },
      });
    } catch (err) {
      return this.gone(outcome('error', `could not create container: ${message(err)}`));
    }

    const out = new OutputCapture(req.maxOutputBytes);
    const err = new OutputCapture(req.maxOutputBytes);
    let timedOut = false;
    let cancelled = false;
    const kill = () => container.kill().catch(() => undefined); // already stopped: nothing to do
    const onAbort = () => {
      cancelled = true;
      void kill();
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      const stream = (await container.attach({
        stream: true,
        stdout: true,
        stderr: true,
      })) as unknown as Readable;
      const ended = new Promise<void>((resolve) => {
        stream.once('end', resolve);
        stream.once('close', resolve);
        stream.once('error', () => resolve());
      });
      this.docker.modem.demuxStream(stream, out.writable(), err.writable());

      const startedAt = Date.now();
      try {
        await container.start();
      } catch (e) {
        // e.g. the executable does not exist in the image
        const why = /"timeout": executable file not found/.test(message(e))
          ? 'the image has no `timeout` (coreutils or busybox), which enforces the time limit in the container'
          : message(e);
        // The engine going away under a start is no fault of the image: the run stops (engine_gone).
        return this.gone(outcome('error', `could not start ${cmd}: ${why}`));
      }
      timer = setTimeout(() => {
        timedOut = true;
        void kill();
      }, req.timeoutMs);
      // An abort that came while the container was being created or started has already fired.
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener('abort', onAbort, { once: true });

      const waited = await this.exitOf(container);
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      const info = await container.inspect();
      await Promise.race([ended, new Promise((r) => setTimeout(r, DRAIN_MS))]);
      stream.destroy();

      const o = out.result();
      const e = err.result();
      const killedByUs = timedOut || cancelled;
      const exitCode = killedByUs ? null : waited.StatusCode;
      const oom = !killedByUs && info.State.OOMKilled;
      // `timeout` reports a command it could not run (126, 127) on its own stderr line.
      const notRun =
        exitCode !== null && exitCode >= 126 && exitCode <= 127
          ? /^timeout: (?:failed to run command|can't execute).*$/m.exec(e.text)?.[0]
          : undefined;
      if (notRun) return outcome('error', `could not start ${cmd}: ${notRun}`);
      // A signal's exit status from a container the engine killed or stopped (an operator, a daemon
      // going down): the tests did not end it, so it is no test result.
      if (
        exitCode !== null &&
        exitCode > 128 &&
        (await killedByEngine(this.docker, container.id, startedAt).catch(() => false))
      )
        return {
          ...outcome(
            'error',
            `${INFRA}the engine killed the container (exit ${exitCode}); this is no test result`,
          ),
          stdout: o.text,
          stderr: e.text,
        };
      return {
        exit_code: exitCode,
        stdout: o.text,
        stderr: e.text,
        stdout_truncated: o.truncated,
        stderr_truncated: e.truncated,
        timed_out: timedOut,
        duration_ms: elapsed(),
        status: cancelled ? 'cancelled' : oom ? 'error' : statusFromExit(exitCode, timedOut),
        summary: parseTestSummary(o.text, e.text),
        ...(oom ? { detail: 'killed: out of memory' } : {}),
      };
    } catch (e) {
      if (cancelled) return outcome('cancelled', `${INFRA}container run failed: ${message(e)}`);
      return this.gone(outcome('error', `${INFRA}container run failed: ${message(e)}`));
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      await container.remove({ force: true }).catch(() => undefined);
    }
  }
}
