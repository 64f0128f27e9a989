import { execa } from 'execa';
import { capMiddle } from '../trace/cap.js';
import { wasLent } from './stage.js';
import type { WorktreeGit } from './types.js';

/** The one git runner of the project: no shell, no prompts, no ambient configuration or credentials. */

export interface GitOptions {
  cwd: string;
  env?: Record<string, string>;
  input?: string | Buffer;
  allowFail?: boolean;
  /**
   * Per-call configuration (e.g. an auth header for one push), passed through the environment
   * rather than `-c`, so it is in no config file and not in the process list.
   */
  config?: GitConfig;
  /**
   * Aborting it kills git and everything git started (a remote helper, index-pack, ssh: its process
   * group) at once; git then counts as failed.
   */
  signal?: AbortSignal;
  /** Output past this (characters of stdout or stderr) stops git: never held whole (unset: execa's 100 MB). */
  maxBuffer?: number;
}

export type GitConfig = ReadonlyArray<readonly [string, string]>;

export interface GitResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  /** Git was stopped for output past `maxBuffer`; what it printed is dropped. */
  overflow?: true;
}

/** A git stderr as it may be stored (in an error, a result, a report): head and tail, trimmed. */
export const capStderr = (stderr: string): string => capMiddle(stderr.trim());

/** git's words for an object the repository lacks, as one plain sentence; null for any other failure. */
function missingObject(stderr: string): string | null {
  const m =
    /unable to read sha1 file of (\S+) \(([0-9a-f]{7,})\)|missing (?:blob|tree|commit) ([0-9a-f]{7,})/.exec(
      stderr,
    );
  if (!m) return null;
  const what = m[1] ? `${m[1]}, ${m[2]!.slice(0, 12)}` : m[3]!.slice(0, 12);
  return `The source repository is missing an object (${what}): it is incomplete or damaged, so this commit cannot be checked out; repair or re-clone it.`;
}

export class GitError extends Error {
  /** Head and tail only: a failing git can print megabytes, and errors are stored. */
  readonly stderr: string;
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number,
    stderr: string,
  ) {
    // Credentials are removed before cutting: a cut could leave part of one unrecognised.
    const command = capMiddle(args.map(stripUserinfo).join(' '), 512);
    const capped = capStderr(stripUserinfo(stderr));
    super(missingObject(capped) ?? `git ${command} failed (exit ${exitCode}): ${capped}`);
    this.stderr = capped;
    this.name = 'GitError';
  }
}

/** Identity of commits the app makes; never the host user's. */
export const GIT_IDENTITY = { name: 'AgenticFix', email: 'agenticfix@users.noreply.github.com' } as const;

/** Only these host variables reach git: credentials, agents and askpass helpers never do. */
const INHERITED = ['PATH', 'HOME', 'TMPDIR', 'SYSTEMROOT'] as const;

/** Config forced on every invocation (through GIT_CONFIG_* so it overrides repository config). */
const FORCED_CONFIG: ReadonlyArray<readonly [string, string]> = [
  ['credential.helper', ''], // an empty value resets the helper list
  ['core.hooksPath', '/dev/null'], // repositories we touch never run hooks on the host
  ['core.excludesFile', '/dev/null'], // the host user's global ignores must not shape a patch
  ['core.fsmonitor', 'false'],
  ['core.attributesFile', '/dev/null'], // nor the host user's global attributes
];

function baseEnv(extra: GitConfig = []): Record<string, string> {
  const config = [...FORCED_CONFIG, ...extra];
  const env: Record<string, string> = {};
  for (const k of INHERITED) {
    const v = process.env[k];
    if (v !== undefined) env[k] = v;
  }
  Object.assign(env, {
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_SSH_COMMAND: 'ssh -o BatchMode=yes',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: GIT_IDENTITY.name,
    GIT_AUTHOR_EMAIL: GIT_IDENTITY.email,
    GIT_COMMITTER_NAME: GIT_IDENTITY.name,
    GIT_COMMITTER_EMAIL: GIT_IDENTITY.email,
    GIT_CONFIG_COUNT: String(config.length),
  });
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** Runs `git args` in `cwd`; throws GitError on a non-zero exit unless `allowFail`. Output is not trimmed. */
export async function git(args: string[], opts: GitOptions): Promise<GitResult> {
  const { signal } = opts;
  const child = execa('git', args, {
    cwd: opts.cwd,
    env: { ...baseEnv(opts.config), ...opts.env },
    extendEnv: false,
    input: opts.input ?? '',
    reject: false,
    stripFinalNewline: false,
    // A group of its own, so a stop reaches the helpers git spawned and not this process.
    detached: signal !== undefined,
    ...(opts.maxBuffer !== undefined && { maxBuffer: opts.maxBuffer }),
  });
  const stop = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group has already ended
    }
  };
  if (signal?.aborted) stop();
  signal?.addEventListener('abort', stop, { once: true });
  const res = await child.finally(() => signal?.removeEventListener('abort', stop));
  // No exit code means git never ran (missing binary, bad cwd) or was killed: report execa's reason.
  const out: GitResult = res.isMaxBuffer
    ? {
        stdout: '',
        stderr: `output over ${opts.maxBuffer} characters: stopped`,
        exitCode: -1,
        overflow: true,
      }
    : res.exitCode === undefined
      ? { stdout: res.stdout, stderr: res.stderr || (res.message ?? 'git did not run'), exitCode: -1 }
      : { stdout: res.stdout, stderr: res.stderr, exitCode: res.exitCode };
  if (out.exitCode !== 0 && !opts.allowFail) throw new GitError(args, out.exitCode, out.stderr);
  return out;
}

/**
 * Runs `git args` in `cwd` and hands each NUL-terminated record of its output (`-z`) to `take` as it
 * streams, never holding the whole output; `take` returning false stops git. Resolves once git ended or
 * was stopped; throws GitError when git failed on its own.
 */
export async function gitRecords(
  args: string[],
  cwd: string,
  take: (record: string) => boolean,
): Promise<void> {
  const child = execa('git', args, {
    cwd,
    env: baseEnv(),
    extendEnv: false,
    stdin: 'ignore',
    buffer: { stdout: false },
    reject: false,
  });
  let rest = Buffer.alloc(0);
  let stopped = false;
  for await (const chunk of child.stdout as AsyncIterable<Buffer>) {
    rest = Buffer.concat([rest, chunk]);
    let end: number;
    while (!stopped && (end = rest.indexOf(0)) !== -1) {
      stopped = !take(rest.subarray(0, end).toString('utf8'));
      rest = rest.subarray(end + 1);
    }
    if (stopped) {
      child.kill();
      break;
    }
  }
  const res = await child;
  if (!stopped && res.exitCode !== 0) throw new GitError(args, res.exitCode ?? -1, String(res.stderr));
}

/**
 * Runs git on a worktree with the repository given explicitly (GIT_DIR = its admin dir in the mirror,
 * GIT_WORK_TREE = the worktree), so git never discovers one from the worktree. Refused on a worktree that
 * was lent to a container: after untrusted code ran, host git works only on its host-owned copy (the
 * stage, ./stage.ts), never on the tree the code wrote.
 */
export function worktreeGit(wt: WorktreeGit, args: string[], opts: Omit<GitOptions, 'cwd'> = {}) {
  if (wasLent(wt.path))
    return Promise.reject(
      new GitError(args, -1, `refused: ${wt.path} was lent to a container; git works on its stage only`),
    );
  return git(args, {
    ...opts,
    cwd: wt.path,
    env: { ...opts.env, GIT_DIR: wt.gitDir, GIT_WORK_TREE: wt.path },
  });
}

/** Removes `user:password@` from URLs so tokens never reach logs or errors. */
export function stripUserinfo(s: string): string {
  return s.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]+@/gi, '$1');
}
