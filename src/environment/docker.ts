import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { OutputCapture } from './capture.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import type { RunOutcome, RunRequest, Sandbox } from './types.js';
import {
  answered,
  containerLabels,
  DEADLINE_GRACE_MS,
  ENGINE_LATE_MS,
  EngineHung,
  endedOutcome,
  engineEvents,
  INFRA,
  lentRun,
  message,
  NO_TIMEOUT_WHY,
  TEST_ENV,
  testHostConfig,
  worktreeBinds,
  type LentCall,
} from './containers.js';

export {
  DEADLINE_LABEL,
  hostPath,
  INFRA,
  LABEL,
  OWNER_LABEL,
  RUN_LABEL,
  WRITABLE_ENV,
} from './containers.js';
export { FALLBACK_USER } from './lending.js';

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

/** Gone, or hung: it answers its ping but not a short listing within `callMs`. */
export async function engineFailed(docker: Docker, callMs: number): Promise<boolean> {
  if (await engineGone(docker)) return true;
  const listing = answered(
    'a listing of containers',
    (o) => docker.listContainers({ ...o, limit: 1 }),
    callMs,
  );
  return listing.then(
    () => false,
    (err: unknown) => err instanceof EngineHung,
  );
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
    protected readonly docker: Docker,
    readonly imageId: string,
    protected readonly limits: Config['sandbox'],
    protected readonly runId = 'none',
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
      await this.answered('an image inspection', () => this.docker.getImage(this.imageId).inspect());
      return true;
    } catch (err) {
      // Only "no such image" means gone; any other engine error (a hung engine too) shows up in the run.
      return (err as { statusCode?: number }).statusCode !== 404;
    }
  }

  /**
   * `p`, or a rejection once the engine stops answering. docker-modem never settles a wait (nor ends an
   * output stream) whose connection the engine dropped as it went away: the run hung there. The engine
   * is pinged meanwhile, and `p` outlives it by one ping at most. A hung engine answers pings: past the
   * call's in-container deadline (`timeoutMs` from now, and its grace) and ENGINE_LATE_MS, EngineHung.
   */
  protected async whileEngineAnswers<T>(p: Promise<T>, timeoutMs: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let late: NodeJS.Timeout | undefined;
    let settled = false;
    const gone = new Promise<never>((_, reject) => {
      const margin = (DEADLINE_GRACE_MS + ENGINE_LATE_MS) / 1000;
      late = setTimeout(
        () =>
          reject(new EngineHung(`the Docker engine did not end the call within ${margin} s of its deadline`)),
        timeoutMs + DEADLINE_GRACE_MS + ENGINE_LATE_MS,
      );
      const check = async () => {
        const down = await engineGone(this.docker);
        if (settled) return;
        if (down) reject(new Error('the Docker engine stopped answering'));
        else timer = setTimeout(() => void check(), ENGINE_POLL_MS);
      };
      timer = setTimeout(() => void check(), ENGINE_POLL_MS);
    });
    try {
      return await Promise.race([p, gone]);
    } finally {
      settled = true;
      clearTimeout(timer);
      clearTimeout(late);
    }
  }

  /** A failed outcome, marked when the engine has gone meanwhile or hung (`err`). */
  protected async gone(o: RunOutcome, err?: unknown): Promise<RunOutcome> {
    return err instanceof EngineHung || (await engineGone(this.docker)) ? { ...o, engine_gone: true } : o;
  }

  /** One engine request, given up after the engine-call bound (EngineHung). */
  protected answered<T>(what: string, request: (o: { abortSignal: AbortSignal }) => Promise<T>): Promise<T> {
    return answered(what, request, this.limits.engineCallTimeoutMs);
  }

  /** Removes a container; when the engine hung, without waiting for it (the sweep removes what stays). */
  protected async removeContainer(container: Docker.Container, hung: boolean): Promise<void> {
    const done = this.answered('a removal', (o) => container.remove({ force: true, ...o })).catch(
      () => undefined,
    );
    if (!hung) await done;
  }

  run(req: RunRequest): Promise<RunOutcome> {
    return lentRun(req, (call) => this.runOnce(call, req));
  }

  private async runOnce(call: LentCall, req: RunRequest): Promise<RunOutcome> {
    const { cmd, args, outcome } = call;
    const deadlineS = Math.ceil((req.timeoutMs + DEADLINE_GRACE_MS) / 1000);
    let container: Docker.Container;
    try {
      container = await this.answered('a container creation', (o) =>
        this.docker.createContainer({
          ...o,
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
          User: call.user,
          Env: TEST_ENV,
          Labels: containerLabels(this.runId, Date.now() + deadlineS * 1000),
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
          HostConfig: testHostConfig(this.limits, worktreeBinds(req.worktree, call.hasGit, this.limits)),
        }),
      );
    } catch (err) {
      return this.gone(outcome('error', `could not create container: ${message(err)}`), err);
    }

    const out = new OutputCapture(req.maxOutputBytes);
    const err = new OutputCapture(req.maxOutputBytes);
    let timedOut = false;
    let cancelled = false;
    let hung = false;
    // Already stopped: nothing to do.
    const kill = () => this.answered('a kill', (o) => container.kill(o)).catch(() => undefined);
    const onAbort = () => {
      cancelled = true;
      void kill();
    };
    let timer: NodeJS.Timeout | undefined;
    // A wait given up (the engine hung) is closed, not left open for ever.
    const given = new AbortController();
    let stream: Readable | undefined;
    try {
      stream = (await this.answered('an attach', (o) =>
        container.attach({ ...o, stream: true, stdout: true, stderr: true }),
      )) as unknown as Readable;
      const ended = streamEnd(stream);
      this.docker.modem.demuxStream(stream, out.writable(), err.writable());

      const startedAt = Date.now();
      try {
        await this.answered('a start', (o) => container.start(o));
      } catch (e) {
        // e.g. the executable does not exist in the image
        const why = /"timeout": executable file not found/.test(message(e)) ? NO_TIMEOUT_WHY : message(e);
        // The engine going away under a start is no fault of the image: the run stops (engine_gone).
        hung = e instanceof EngineHung;
        return this.gone(outcome('error', `could not start ${cmd}: ${why}`), e);
      }
      timer = setTimeout(() => {
        timedOut = true;
        void kill();
      }, req.timeoutMs);
      // An abort that came while the container was being created or started has already fired.
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener('abort', onAbort, { once: true });

      const waited = await this.whileEngineAnswers(
        container.wait({ abortSignal: given.signal }) as Promise<{ StatusCode: number }>,
        req.timeoutMs,
      );
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      // The output may end a moment after the exit; a drain timer left armed would hold the process open.
      let drain: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((r) => (drain = setTimeout(r, DRAIN_MS)))]);
      clearTimeout(drain);

      const killedByUs = timedOut || cancelled;
      const status = waited.StatusCode;
      // The engine records an OOM kill apart from the exit and may set OOMKilled after the wait has
      // answered (seen under gVisor on a busy machine): its `oom` event says it too.
      const seen =
        !killedByUs && status !== 0
          ? await engineEvents(this.docker, container.id, startedAt, ['kill', 'stop', 'oom']).catch(
              () => new Set<string>(),
            )
          : new Set<string>();
      const info = await this.answered('an inspection', (o) => container.inspect(o));
      return endedOutcome(call, {
        status,
        out: out.result(),
        err: err.result(),
        timedOut,
        cancelled,
        oom: info.State.OOMKilled || seen.has('oom'),
        engineKilled: status > 128 && (seen.has('kill') || seen.has('stop')),
      });
    } catch (e) {
      hung = e instanceof EngineHung;
      if (cancelled && !hung) return outcome('cancelled', `${INFRA}container run failed: ${message(e)}`);
      const why = hung ? message(e) : `container run failed: ${message(e)}`;
      return this.gone(outcome('error', `${INFRA}${why}`), e);
    } finally {
      clearTimeout(timer);
      given.abort();
      stream?.destroy();
      req.signal?.removeEventListener('abort', onAbort);
      await this.removeContainer(container, hung);
    }
  }
}

/** Resolves when an engine stream has ended, whichever way. */
export function streamEnd(stream: Readable): Promise<void> {
  return new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}
