/**
 * Real git behind the emulator: bare repositories created with the git CLI, read with plumbing
 * commands, and served over smart HTTP by `git http-backend` running as a CGI program.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Fixed identity so the emulator never depends on the host's git configuration. */
const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Emulator',
  GIT_AUTHOR_EMAIL: 'emulator@example.invalid',
  GIT_COMMITTER_NAME: 'Emulator',
  GIT_COMMITTER_EMAIL: 'emulator@example.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
};

export interface GitResult {
  ok: boolean;
  stdout: Buffer;
}

/** Runs git against a bare repository; a non-zero exit is a result, not an exception. */
export function git(gitDir: string, args: string[], workTree?: string): GitResult {
  const base = workTree ? ['--git-dir', gitDir, '--work-tree', workTree] : ['--git-dir', gitDir];
  try {
    const stdout = execFileSync('git', [...base, ...args], {
      env: { ...process.env, ...GIT_ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 256 * 1024 * 1024,
    });
    return { ok: true, stdout };
  } catch (err) {
    return { ok: false, stdout: (err as { stdout?: Buffer }).stdout ?? Buffer.alloc(0) };
  }
}

function gitText(gitDir: string, args: string[]): string | null {
  const r = git(gitDir, args);
  return r.ok ? r.stdout.toString('utf8').trim() : null;
}

function mustGit(gitDir: string, args: string[], workTree?: string): void {
  const r = git(gitDir, args, workTree);
  if (!r.ok) throw new Error(`git ${args.join(' ')} failed in ${gitDir}`);
}

/**
 * Creates a bare repository whose default branch holds one commit with the given tree (a directory,
 * or files written to a scratch directory). The source directory is only read.
 */
export function createBareRepo(
  bareDir: string,
  defaultBranch: string,
  source: { fromDir?: string; files?: Record<string, string> },
): string {
  mkdirSync(bareDir, { recursive: true });
  mustGit(bareDir, ['init', '--bare', '--quiet']);
  mustGit(bareDir, ['symbolic-ref', 'HEAD', `refs/heads/${defaultBranch}`]);
  mustGit(bareDir, ['config', 'http.receivepack', 'true']);
  const scratch = source.fromDir ? null : mkdtempSync(path.join(tmpdir(), 'emu-files-'));
  try {
    if (scratch) {
      for (const [file, content] of Object.entries(source.files ?? {})) {
        const target = path.join(scratch, file);
        mkdirSync(path.dirname(target), { recursive: true });
        writeFileSync(target, content);
      }
    }
    const tree = source.fromDir ?? (scratch as string);
    mustGit(bareDir, ['add', '--all', '.'], tree);
    mustGit(bareDir, ['commit', '--quiet', '--allow-empty', '-m', 'Initial commit'], tree);
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    rmSync(path.join(bareDir, 'index'), { force: true });
  }
  return resolveCommit(bareDir, defaultBranch) as string;
}

/** The commit a branch, tag or sha names, or null. */
export function resolveCommit(gitDir: string, ref: string): string | null {
  if (ref.startsWith('-')) return null;
  return gitText(gitDir, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
}

export function branchExists(gitDir: string, branch: string): boolean {
  return git(gitDir, ['show-ref', '--verify', '--quiet', `refs/heads/${branch}`]).ok;
}

export interface CommitInfo {
  sha: string;
  tree: string;
  parents: string[];
  authorName: string;
  authorEmail: string;
  date: string;
  message: string;
}

export function commitInfo(gitDir: string, sha: string): CommitInfo | null {
  const out = gitText(gitDir, ['show', '-s', '--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%B', sha]);
  if (out === null) return null;
  const [commit = '', tree = '', parents = '', authorName = '', authorEmail = '', date = '', message = ''] =
    out.split('\0');
  return {
    sha: commit,
    tree,
    parents: parents ? parents.split(' ') : [],
    authorName,
    authorEmail,
    date,
    message,
  };
}

export type TreeEntry =
  | { kind: 'blob'; sha: string; content: Buffer }
  | { kind: 'tree'; entries: { type: string; sha: string; name: string; size: number }[] };

/** A blob's bytes by its id; null when there is no such blob. */
export function readBlob(gitDir: string, sha: string): Buffer | null {
  if (gitText(gitDir, ['cat-file', '-t', sha]) !== 'blob') return null;
  return git(gitDir, ['cat-file', 'blob', sha]).stdout;
}

/** Reads `ref:path`: a file's bytes or a directory's listing; null when absent. */
export function readTreePath(gitDir: string, commit: string, filePath: string): TreeEntry | null {
  const spec = `${commit}:${filePath}`;
  const type = gitText(gitDir, ['cat-file', '-t', spec]);
  if (type === 'blob') {
    const sha = gitText(gitDir, ['rev-parse', spec]) as string;
    return { kind: 'blob', sha, content: git(gitDir, ['cat-file', 'blob', sha]).stdout };
  }
  if (type !== 'tree') return null;
  const out = gitText(gitDir, ['ls-tree', '-z', '--long', spec]) ?? '';
  const entries = out
    .split('\0')
    .filter(Boolean)
    .map((line) => {
      const [meta = '', name = ''] = line.split('\t');
      const [, kind = '', sha = '', size = ''] = meta.split(/\s+/);
      return { type: kind, sha, name, size: Number(size) || 0 };
    });
  return { kind: 'tree', entries };
}

export interface ChangedFile {
  sha: string;
  filename: string;
  status: 'added' | 'removed' | 'modified' | 'renamed';
  additions: number;
  deletions: number;
  changes: number;
  patch?: string;
  previous_filename?: string;
}

/** The files a pull request changes: `git diff base...head`, as GitHub computes it. */
export function diffFiles(gitDir: string, base: string, head: string): ChangedFile[] {
  const range = `${base}...${head}`;
  const names = (gitText(gitDir, ['diff', '--name-status', '-z', '-M', range]) ?? '').split('\0');
  const stats = (gitText(gitDir, ['diff', '--numstat', '-z', '-M', range]) ?? '').split('\0');
  const files: ChangedFile[] = [];
  while (names.length > 1) {
    const code = names.shift() as string;
    const renamed = code.startsWith('R');
    const previous = renamed ? (names.shift() as string) : undefined;
    const filename = names.shift() as string;
    // numstat -z prints "adds\tdels\tpath" or, for renames, "adds\tdels\t" followed by both paths.
    const [adds = '0', dels = '0'] = (stats.shift() ?? '').split('\t');
    if (renamed) stats.splice(0, 2);
    const additions = Number(adds) || 0;
    const deletions = Number(dels) || 0;
    const status = renamed ? 'renamed' : code === 'A' ? 'added' : code === 'D' ? 'removed' : 'modified';
    const patchText = gitText(gitDir, ['diff', '-M', range, '--', ...(previous ? [previous] : []), filename]);
    const hunk = patchText?.indexOf('\n@@') ?? -1;
    files.push({
      sha: gitText(gitDir, ['rev-parse', `${status === 'removed' ? base : head}:${filename}`]) ?? '',
      filename,
      status,
      additions,
      deletions,
      changes: additions + deletions,
      ...(patchText && hunk >= 0 ? { patch: patchText.slice(hunk + 1) } : {}),
      ...(previous ? { previous_filename: previous } : {}),
    });
  }
  return files;
}

/** Whether `head` has commits that `base` lacks. */
export function hasCommitsBetween(gitDir: string, base: string, head: string): boolean {
  return Number(gitText(gitDir, ['rev-list', '--count', `${base}..${head}`]) ?? '0') > 0;
}

/** Where an answer is written: the client's ServerResponse, or nowhere (an answer lost on its way). */
export interface AnswerSink {
  readonly headersSent: boolean;
  writeHead(status: number, headers?: Record<string, string>): unknown;
  write(chunk: Buffer | string): unknown;
  end(): unknown;
}

/** An answer nobody receives. */
export function discard(): AnswerSink {
  let sent = false;
  return {
    get headersSent() {
      return sent;
    },
    writeHead: () => (sent = true),
    write: () => true,
    end: () => undefined,
  };
}

/**
 * Serves one smart-HTTP request with `git http-backend` (CGI): request headers become CGI
 * variables, the body is piped to its stdin, and its stdout is split into CGI headers and body.
 */
export function serveGitHttp(
  req: IncomingMessage,
  res: AnswerSink,
  cgi: { projectRoot: string; pathInfo: string; query: string; remoteUser?: string },
): Promise<number> {
  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(', ') : (v ?? '');
  };
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...GIT_ENV,
    GIT_PROJECT_ROOT: cgi.projectRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: cgi.pathInfo,
    QUERY_STRING: cgi.query,
    REQUEST_METHOD: req.method ?? 'GET',
    CONTENT_TYPE: header('content-type'),
    REMOTE_USER: cgi.remoteUser ?? '',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    GIT_PROTOCOL: header('git-protocol'),
    HTTP_CONTENT_ENCODING: header('content-encoding'),
  };
  if (req.headers['content-length']) env.CONTENT_LENGTH = header('content-length');
  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  req.pipe(child.stdin);
  child.stdin.on('error', () => child.kill());

  return new Promise((resolve) => {
    let pending: Buffer | null = Buffer.alloc(0);
    let status = 200;
    child.stdout.on('data', (chunk: Buffer) => {
      if (pending === null) {
        res.write(chunk);
        return;
      }
      pending = Buffer.concat([pending, chunk]);
      const crlf = pending.indexOf('\r\n\r\n');
      const lf = pending.indexOf('\n\n');
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
      if (end < 0) return;
      const headers: Record<string, string> = {};
      for (const line of pending.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon <= 0) continue;
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = parseInt(value, 10) || 500;
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(pending.subarray(end));
      pending = null;
    });
    child.on('close', (code) => {
      if (pending !== null && !res.headersSent) {
        status = 500;
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.write(`git http-backend exited with ${code}\n`);
      }
      res.end();
      resolve(status);
    });
  });
}

/**
 * GitHub's `diff_hunk` for a review comment on new-side `line` of `file` in `base...head`: the hunk's
 * header and its lines up to the commented one. Null when the line is not part of the diff.
 */
export function diffHunk(
  gitDir: string,
  base: string,
  head: string,
  file: string,
  line: number,
): string | null {
  const text = gitText(gitDir, ['diff', `${base}...${head}`, '--', file]);
  if (!text) return null;
  let hunk: string[] | null = null;
  let newLine = 0;
  for (const l of text.split('\n')) {
    const header = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (header) {
      hunk = [l];
      newLine = Number(header[1]) - 1;
      continue;
    }
    if (!hunk) continue;
    hunk.push(l);
    if (l.startsWith('-')) continue;
    newLine++;
    if (newLine === line) return hunk.join('\n');
  }
  return null;
}

/**
 * Commits `files` on top of `branch` as `author` (a person pushing to the branch); a branch that does
 * not exist yet starts at `from`. Returns the commit.
 */
export function commitFiles(
  gitDir: string,
  branch: string,
  from: string,
  files: Record<string, string>,
  message: string,
  author: string,
): string {
  const existing = resolveCommit(gitDir, branch);
  const parent = existing ?? resolveCommit(gitDir, from);
  if (!parent) throw new Error(`no branch ${branch} and no ${from} to start it from`);
  const scratch = mkdtempSync(path.join(tmpdir(), 'emu-commit-'));
  const env = {
    ...process.env,
    ...GIT_ENV,
    GIT_INDEX_FILE: path.join(scratch, 'index'),
    GIT_AUTHOR_NAME: author,
    GIT_AUTHOR_EMAIL: `${author}@users.noreply.example.invalid`,
  };
  const run = (args: string[], input?: string) =>
    execFileSync('git', ['--git-dir', gitDir, ...args], { env, input, stdio: ['pipe', 'pipe', 'pipe'] })
      .toString('utf8')
      .trim();
  try {
    run(['read-tree', parent]);
    for (const [file, content] of Object.entries(files)) {
      const blob = run(['hash-object', '-w', '--stdin'], content);
      run(['update-index', '--add', '--cacheinfo', `100644,${blob},${file}`]);
    }
    const tree = run(['write-tree']);
    const commit = run(['commit-tree', tree, '-p', parent, '-m', message]);
    run(['update-ref', `refs/heads/${branch}`, commit, existing ?? '0'.repeat(40)]);
    return commit;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * `count` commits on top of the existing `branch` as `author`, in one `git fast-import` (a long pull
 * request made fast): each appends a line to `file`. Returns the last commit.
 */
export function commitMany(
  gitDir: string,
  branch: string,
  file: string,
  count: number,
  author: string,
): string {
  const parent = resolveCommit(gitDir, branch);
  if (!parent) throw new Error(`no branch ${branch}`);
  const who = `${author} <${author}@users.noreply.example.invalid> ${Math.floor(Date.now() / 1000)} +0000`;
  const data = (text: string) => `data ${Buffer.byteLength(text)}\n${text}\n`;
  let lines = '';
  let stream = '';
  for (let i = 1; i <= count; i++) {
    lines += `line ${i}\n`;
    stream += `commit refs/heads/${branch}\nauthor ${who}\ncommitter ${who}\n${data(`Note ${i}`)}`;
    stream += `${i === 1 ? `from ${parent}\n` : ''}M 100644 inline ${file}\n${data(lines)}\n`;
  }
  execFileSync('git', ['--git-dir', gitDir, 'fast-import', '--quiet'], {
    env: { ...process.env, ...GIT_ENV },
    input: stream,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return resolveCommit(gitDir, branch) as string;
}

/** The best common ancestor of two commits; null when they share none. */
export function mergeBase(gitDir: string, a: string, b: string): string | null {
  return gitText(gitDir, ['merge-base', a, b]);
}

/** Commits on `head` that `base` lacks, oldest first (a pull request's commits). */
export function commitsBetween(gitDir: string, base: string, head: string): string[] {
  return (gitText(gitDir, ['rev-list', '--reverse', `${base}..${head}`]) ?? '').split('\n').filter(Boolean);
}
