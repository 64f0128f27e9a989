import { execa } from 'execa';
import { capMiddle } from '../trace/cap.js';

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
}

export type GitConfig = ReadonlyArray<readonly [string, string]>;

export interface GitResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export class GitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(
      // Credentials are removed before cutting (a cut could leave part of one unrecognised); then the
      // cap: a failing git can print megabytes (100 MB seen), and errors are stored.
      `git ${args.map(stripUserinfo).join(' ')} failed (exit ${exitCode}): ${capMiddle(stripUserinfo(stderr).trim())}`,
    );
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
  const res = await execa('git', args, {
    cwd: opts.cwd,
    env: { ...baseEnv(opts.config), ...opts.env },
    extendEnv: false,
    input: opts.input ?? '',
    reject: false,
    stripFinalNewline: false,
  });
  // No exit code means git never ran (missing binary, bad cwd) or was killed: report execa's reason.
  const out =
    res.exitCode === undefined
      ? { stdout: res.stdout, stderr: res.stderr || (res.message ?? 'git did not run'), exitCode: -1 }
      : { stdout: res.stdout, stderr: res.stderr, exitCode: res.exitCode };
  if (out.exitCode !== 0 && !opts.allowFail) throw new GitError(args, out.exitCode, out.stderr);
  return out;
}

/** Removes `user:password@` from URLs so tokens never reach logs or errors. */
export function stripUserinfo(s: string): string {
  return s.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/@\s]+@/gi, '$1');
}
