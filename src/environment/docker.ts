import { lchown, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { gitLinkChanges, restoreGitLink, snapshotGitLink, type GitLinkSnapshot } from '../workspace/guard.js';
import { OutputCapture } from './capture.js';
import { parseTestSummary, statusFromExit } from './summary.js';
import type { RunOutcome, RunRequest, Sandbox } from './types.js';

/** Where the worktree appears inside every test container. */
export const CONTAINER_WORKTREE = '/workspace';
/** Used when the worktree is owned by root: tests never run as root, even with no capabilities. */
export const FALLBACK_USER = '65534:65534';
/** Label on everything AgenticFix creates in the engine, so leftovers can be found. */
export const LABEL = 'agenticfix';
export const RUN_LABEL = 'agenticfix.run';

/** How long to keep reading output after the container exited (the attach stream ends on its own). */
const DRAIN_MS = 2000;

/** Whether a Docker engine answers. Never throws. */
export async function dockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Changes the owner of every entry under `dir` (symlinks themselves, never their targets). Walks
 * by hand: `readdir({ recursive: true })` descends into linked directories, so a link a test
 * planted to a host directory would hand that directory's files to another owner.
 */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  for (const d of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) await chownTree(p, uid, gid);
    else await lchown(p, uid, gid);
  }
}

/**
 * The user the tests run as: the worktree's owner, so files they write stay owned correctly on the
 * host. Tests never run as root: a root-owned worktree (the service running as root) is lent to an
 * unprivileged uid for the run and handed back to root afterwards, new files included.
 */
async function worktreeUser(worktree: string): Promise<{ user: string; release: () => Promise<void> }> {
  const st = await stat(worktree);
  if (st.uid !== 0) return { user: `${st.uid}:${st.gid}`, release: async () => {} };
  const [uid, gid] = FALLBACK_USER.split(':').map(Number) as [number, number];
  await chownTree(worktree, uid, gid);
  return { user: FALLBACK_USER, release: () => chownTree(worktree, st.uid, st.gid) };
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
      memory_bytes: this.limits.memoryBytes,
      nano_cpus: this.limits.nanoCpus,
      pids_limit: this.limits.pidsLimit,
      tmpfs_bytes: this.limits.tmpfsBytes,
    };
  }

  async run(req: RunRequest): Promise<RunOutcome> {
    const started = Date.now();
    const outcome = (status: RunOutcome['status'], detail?: string): RunOutcome => ({
      exit_code: null,
      stdout: '',
      stderr: '',
      stdout_truncated: false,
      stderr_truncated: false,
      timed_out: false,
      duration_ms: Date.now() - started,
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
      owner = await worktreeUser(req.worktree);
    } catch (err) {
      return outcome('error', `worktree not accessible: ${message(err)}`);
    }
    let result: RunOutcome;
    try {
      result = await this.runAs(owner.user, cmd, args, req, started, outcome, link);
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
    started: number,
    outcome: (status: RunOutcome['status'], detail?: string) => RunOutcome,
    link: GitLinkSnapshot,
  ): Promise<RunOutcome> {
    const binds = [`${req.worktree}:${CONTAINER_WORKTREE}:rw`];
    // `.git` is bind-mounted read-only over the writable worktree: as a mount point it cannot be
    // written, removed or replaced by a rename, so the tests cannot point it at a repository of their
    // own. Read-only rather than masked: nothing on the host has to be made or cleaned up per run, and
    // its content (a path the container cannot reach) tells the tests nothing useful. Host git does not
    // read it anyway (GIT_DIR is explicit); the check after the run catches any change all the same.
    if (link.dotGit.kind !== 'missing')
      binds.push(`${path.join(req.worktree, '.git')}:${CONTAINER_WORKTREE}/.git:ro`);
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        Image: this.imageId,
        // The argv is run as given, never through a shell or an ENTRYPOINT the model wrote.
        Entrypoint: [cmd],
        Cmd: args,
        WorkingDir: CONTAINER_WORKTREE,
        User: user,
        Env: ['HOME=/tmp', 'LANG=C.UTF-8', 'CI=1'],
        Labels: { [LABEL]: '1', [RUN_LABEL]: this.runId },
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        NetworkDisabled: true,
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
        },
      });
    } catch (err) {
      return outcome('error', `could not create container: ${message(err)}`);
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

      try {
        await container.start();
      } catch (e) {
        // e.g. the executable does not exist in the image
        return outcome('error', `could not start ${cmd}: ${message(e)}`);
      }
      timer = setTimeout(() => {
        timedOut = true;
        void kill();
      }, req.timeoutMs);
      // An abort that came while the container was being created or started has already fired.
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener('abort', onAbort, { once: true });

      const waited = (await container.wait()) as { StatusCode: number };
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
      return {
        exit_code: exitCode,
        stdout: o.text,
        stderr: e.text,
        stdout_truncated: o.truncated,
        stderr_truncated: e.truncated,
        timed_out: timedOut,
        duration_ms: Date.now() - started,
        status: cancelled ? 'cancelled' : oom ? 'error' : statusFromExit(exitCode, timedOut),
        summary: parseTestSummary(o.text, e.text),
        ...(oom ? { detail: 'killed: out of memory' } : {}),
      };
    } catch (e) {
      return outcome(cancelled ? 'cancelled' : 'error', `container run failed: ${message(e)}`);
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      await container.remove({ force: true }).catch(() => undefined);
    }
  }
}
