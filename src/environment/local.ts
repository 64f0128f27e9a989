import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import path from 'node:path';
import { captureStream } from './capture.js';
import { parseTestSummary, statusFromExit } from '../testrunners/summary.js';
import type { RunOutcome, RunRequest, Sandbox } from './types.js';
import { stopwatch } from '../trace/phases.js';
import { markLent } from '../workspace/stage.js';

const PIPE_GRACE_MS = 2000;

/**
 * Runs a test argv directly on the host. This is NO isolation: the process can read and write
 * anything the host user can, reach the network and escape its process group. It exists for the
 * built-in demo and the project's own tests, with trusted repositories only; real runs use Docker.
 *
 * What it does guarantee: no shell, the worktree as cwd, a minimal environment (PATH, LANG and a
 * throw-away HOME; no inherited secrets), capped output, and a timeout or cancellation that kills
 * the whole process group.
 */
export class LocalSandbox implements Sandbox {
  readonly kind = 'local' as const;

  describe(): Record<string, unknown> {
    return { kind: this.kind, isolation: 'none', note: 'trusted repositories only (demo and tests)' };
  }

  available(): Promise<boolean> {
    return Promise.resolve(true);
  }

  async run(req: RunRequest): Promise<RunOutcome> {
    const elapsed = stopwatch();
    const base = {
      stdout: '',
      stderr: '',
      stdout_truncated: false,
      stderr_truncated: false,
      timed_out: false,
      summary: null,
    };
    const [cmd, ...args] = req.argv;
    if (!cmd) return { ...base, exit_code: null, duration_ms: 0, status: 'error', detail: 'empty argv' };
    if (req.signal?.aborted) return { ...base, exit_code: null, duration_ms: 0, status: 'cancelled' };

    await markLent(req.worktree); // the same rule as for containers: host git works on the stage only
    const home = mkdtempSync(path.join(tmpdir(), 'agenticfix-home-'));
    try {
      const child = spawn(cmd, args, {
        cwd: req.worktree,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8' },
        detached: true, // own process group, so a kill reaches grandchildren too
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const killGroup = () => {
        if (child.pid === undefined) return;
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // group already gone
        }
      };

      let timedOut = false;
      let cancelled = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, req.timeoutMs);
      const onAbort = () => {
        cancelled = true;
        killGroup();
      };
      req.signal?.addEventListener('abort', onAbort, { once: true });

      const stdout = captureStream(child.stdout, req.maxOutputBytes);
      const stderr = captureStream(child.stderr, req.maxOutputBytes);
      const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
        (resolve) => {
          child.once('error', (error) => resolve({ code: null, signal: null, error }));
          child.once('exit', (code, signal) => resolve({ code, signal }));
        },
      );
      // Leftover background processes would hold the pipes open and outlive the run.
      killGroup();
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      // A process that left the group (setsid) could keep the pipes open forever: stop reading.
      const grace = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, PIPE_GRACE_MS);
      const [out, err] = await Promise.all([stdout, stderr]);
      clearTimeout(grace);

      // A test process killed by a signal (not ours) failed; shells report that as 128 + n.
      const exitCode =
        exit.code ?? (exit.signal && !timedOut && !cancelled ? 128 + constants.signals[exit.signal] : null);
      return {
        exit_code: exitCode,
        stdout: out.text,
        stderr: err.text,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        timed_out: timedOut,
        duration_ms: elapsed(),
        status: exit.error ? 'error' : cancelled ? 'cancelled' : statusFromExit(exitCode, timedOut),
        summary: exit.error ? null : parseTestSummary(out.text, err.text),
        ...(exit.error ? { detail: `could not start ${cmd}: ${exit.error.message}` } : {}),
      };
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }
}
