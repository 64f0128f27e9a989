import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Config } from '../config/config.js';
import { CONTAINER_WORKTREE } from '../testrunners/runners.js';
import { OutputCapture } from './capture.js';
import {
  answered,
  containerLabels,
  DEADLINE_GRACE_MS,
  EngineHung,
  endedOutcome,
  engineEvents,
  INFRA,
  lentRun,
  message,
  TEST_ENV,
  testHostConfig,
  worktreeBinds,
  type LentCall,
} from './containers.js';
import { DockerSandbox, streamEnd } from './docker.js';
import type { RunOutcome, RunRequest } from './types.js';

/**
 * Runs each call through a POSIX shell that is given the argv as its arguments (never parsed as shell
 * text): the command under `timeout` (its in-container deadline, for when this process is gone), then
 * every process left of the call's user is killed (`kill -1` spares the caller and the container's
 * init), so nothing a call starts outlives it, in its process group or out of it (setsid).
 */
const CALL_WRAPPER = '"$@"; s=$?; kill -KILL -1 2>/dev/null; exit $s';

/** The keeper (the container's main process) runs as a uid no call runs as, so `kill -1` cannot end it. */
const KEEPERS = ['65533:65533', '65532:65532'] as const;
const keeperFor = (user: string) => KEEPERS.find((k) => k.split(':')[0] !== user.split(':')[0])!;

interface Warm {
  container: Docker.Container;
  /** What the container was made for: a call with another user or `.git` mount needs another one. */
  key: string;
  /** Epoch ms at which its keeper ends (the container's own lifetime). */
  deadline: number;
}

/**
 * The sandbox of one run's tool calls: one container of the run's image, with the same limits as a
 * per-call container (testHostConfig), kept alive by a keeper (`sleep`, under Docker's init, which reaps
 * orphans), and each call a `docker exec` in it under its own deadline and output cap. A call that is
 * killed (timeout, cancellation), that breaks isolation, or after which the container is not healthy,
 * retires the container: the next call gets a fresh one. The run ends it with `close()`; a crashed app's
 * container carries its run, owner and deadline labels for the start-up sweep. Calls in another worktree
 * than the first (the base checkout) run in a fresh container each, as before.
 */
export class WarmSandbox extends DockerSandbox {
  private home: string | null = null;
  private current: Warm | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(docker: Docker, imageId: string, limits: Config['sandbox'], runId = 'none') {
    super(docker, imageId, limits, runId);
  }

  override describe(): Record<string, unknown> {
    return { ...super.describe(), warm: true };
  }

  override run(req: RunRequest): Promise<RunOutcome> {
    if (this.closed || (this.home !== null && req.worktree !== this.home)) return super.run(req);
    this.home ??= req.worktree;
    // One call at a time: a call's `kill -1` would end another's processes.
    const next = this.queue.then(async () => {
      const o = await lentRun(req, (call) => this.exec(call, req));
      if (o.isolation_violation) await this.retire();
      return o;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Removes the container; later calls run in fresh per-call containers. Never throws. */
  async close(): Promise<void> {
    this.closed = true;
    await this.retire();
  }

  /** `hung`: the engine hung, the removal is not waited for (the sweep removes what stays). */
  private async retire(hung = false): Promise<void> {
    const gone = this.current;
    this.current = null;
    if (gone) await this.removeContainer(gone.container, hung);
  }

  /** The container for `call`, started when there is none fit for it (or an error outcome). */
  private async ensure(call: LentCall, needMs: number): Promise<Warm | RunOutcome> {
    const key = `${call.user}|${call.hasGit}`;
    if (this.current && (this.current.key !== key || Date.now() + needMs > this.current.deadline))
      await this.retire();
    if (this.current) return this.current;
    const lifetimeMs = Math.max(this.limits.warmLifetimeMs, needMs);
    const deadline = Date.now() + lifetimeMs;
    let container: Docker.Container;
    try {
      container = await this.answered('a container creation', (o) =>
        this.docker.createContainer({
          ...o,
          Image: this.imageId,
          // Never an ENTRYPOINT the model wrote: `sleep` keeps it alive until its own deadline, when it ends
          // even if this process is gone (an image without `sleep` fails to start: fail closed).
          Entrypoint: ['sleep', String(Math.ceil(lifetimeMs / 1000))],
          Cmd: [],
          WorkingDir: CONTAINER_WORKTREE,
          User: keeperFor(call.user),
          Env: TEST_ENV,
          Labels: containerLabels(this.runId, deadline),
          HostConfig: testHostConfig(this.limits, worktreeBinds(this.home!, call.hasGit, this.limits), {
            Init: true,
          }),
        }),
      );
    } catch (err) {
      return this.gone(call.outcome('error', `could not create container: ${message(err)}`), err);
    }
    try {
      await this.answered('a start', (o) => container.start(o));
    } catch (err) {
      await this.removeContainer(container, err instanceof EngineHung);
      return this.gone(call.outcome('error', `could not start the test container: ${message(err)}`), err);
    }
    this.current = { container, key, deadline };
    if (this.closed) {
      await this.retire();
      return call.outcome('cancelled', 'the run has ended');
    }
    return this.current;
  }

  private async exec(call: LentCall, req: RunRequest): Promise<RunOutcome> {
    const deadlineS = Math.ceil((req.timeoutMs + DEADLINE_GRACE_MS) / 1000);
    for (let attempt = 0; ; attempt++) {
      const warm = await this.ensure(call, deadlineS * 1000 + DEADLINE_GRACE_MS);
      if (!('container' in warm)) return warm;
      const made = await this.answered('an exec', (o) =>
        warm.container.exec({
          ...o,
          Cmd: [
            '/bin/sh',
            '-c',
            CALL_WRAPPER,
            'agenticfix',
            'timeout',
            '-s',
            'KILL',
            String(deadlineS),
            call.cmd,
            ...call.args,
          ],
          User: call.user,
          WorkingDir: CONTAINER_WORKTREE,
          Env: TEST_ENV,
          AttachStdin: false,
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
        }),
      ).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
      if (!(made instanceof Error)) return this.attend(call, req, warm.container, made);
      await this.retire(made instanceof EngineHung);
      // The container has ended (409: its keeper was killed) or is gone (404: removed by hand, or by an
      // engine restart and a prune): once, another one.
      const code = (made as { statusCode?: number }).statusCode;
      if (attempt > 0 || (code !== 409 && code !== 404))
        return this.gone(call.outcome('error', `${INFRA}container run failed: ${message(made)}`), made);
    }
  }

  /** Runs a created exec to its end (or its deadline, or the run's cancellation) and reads its outcome. */
  private async attend(
    call: LentCall,
    req: RunRequest,
    container: Docker.Container,
    exec: Docker.Exec,
  ): Promise<RunOutcome> {
    const out = new OutputCapture(req.maxOutputBytes);
    const err = new OutputCapture(req.maxOutputBytes);
    let timedOut = false;
    let cancelled = false;
    // Killing the container is what ends everything the call started, wherever it went: it is replaced.
    const kill = () => this.answered('a kill', (o) => container.kill(o)).catch(() => undefined);
    const onAbort = () => {
      cancelled = true;
      void kill();
    };
    let timer: NodeJS.Timeout | undefined;
    let retire = false;
    let hung = false;
    let stream: Readable | undefined;
    try {
      const startedAt = Date.now();
      stream = (await this.answered('an exec start', (o) =>
        exec.start({ ...o, hijack: true, stdin: false }),
      )) as unknown as Readable;
      timer = setTimeout(() => {
        timedOut = true;
        void kill();
      }, req.timeoutMs);
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener('abort', onAbort, { once: true });
      const ended = streamEnd(stream);
      this.docker.modem.demuxStream(stream, out.writable(), err.writable());
      await this.whileEngineAnswers(ended, req.timeoutMs);
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      const killedByUs = timedOut || cancelled;
      const status = killedByUs ? 137 : await exitCode(exec, this.limits.engineCallTimeoutMs);
      // Exit by a signal: the OOM killer, the engine, or the tests themselves, which may have ended the
      // wrapper before it killed what they left: the container is replaced whatever struck.
      const seen =
        !killedByUs && status > 128
          ? await engineEvents(this.docker, container.id, startedAt, ['kill', 'stop', 'oom']).catch(
              () => new Set<string>(),
            )
          : new Set<string>();
      retire = killedByUs || status > 128;
      return endedOutcome(call, {
        status,
        out: out.result(),
        err: err.result(),
        timedOut,
        cancelled,
        oom: seen.has('oom'),
        engineKilled: seen.has('kill') || seen.has('stop'),
      });
    } catch (e) {
      retire = true;
      hung = e instanceof EngineHung;
      if (cancelled && !hung) return call.outcome('cancelled', `${INFRA}container run failed: ${message(e)}`);
      const why = hung ? message(e) : `container run failed: ${message(e)}`;
      return this.gone(call.outcome('error', `${INFRA}${why}`), e);
    } finally {
      clearTimeout(timer);
      stream?.destroy();
      req.signal?.removeEventListener('abort', onAbort);
      if (retire) await this.retire(hung);
    }
  }
}

/** The exec's exit code once the engine has recorded it (right after its stream ends, as a rule). */
async function exitCode(exec: Docker.Exec, callMs: number): Promise<number> {
  for (let i = 0; ; i++) {
    const info = (await answered('an exec inspection', (o) => exec.inspect(o), callMs)) as {
      Running: boolean;
      ExitCode: number | null;
    };
    if (!info.Running && info.ExitCode !== null) return info.ExitCode;
    if (i >= 500) return 137; // still running 5 s after its output ended: the container is being killed
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Each run's warm sandbox: one at a time, the previous one removed when the run's environment is built again. */
export class RunSandboxes {
  private readonly byRun = new Map<string, WarmSandbox>();
  private readonly closing = new Set<Promise<void>>();

  constructor(
    private readonly docker: Docker,
    private readonly limits: Config['sandbox'],
  ) {}

  open(imageId: string, runId: string): WarmSandbox {
    this.retire(runId);
    const sandbox = new WarmSandbox(this.docker, imageId, this.limits, runId);
    this.byRun.set(runId, sandbox);
    return sandbox;
  }

  /** Removes the run's container (and waits for those being removed). */
  async close(runId: string): Promise<void> {
    this.retire(runId);
    await Promise.all(this.closing);
  }

  private retire(runId: string): void {
    const previous = this.byRun.get(runId);
    if (!previous) return;
    this.byRun.delete(runId);
    const done = previous.close().finally(() => this.closing.delete(done));
    this.closing.add(done);
  }
}
