import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { git, GitError } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { normalizeRemote } from '../../../src/workspace/remote.js';
import { commitAll, makeSourceRepo, tempDir, writeFiles } from '../../support/git-fixtures.js';

let root: string;
let cleanup: () => Promise<void>;
let source: { path: string; head: string };
let n = 0;

/** A manager over a fresh, empty cache. */
function freshManager() {
  n += 1;
  return new GitWorkspaceManager({
    cacheDir: path.join(root, `cache-${n}`),
    worktreeDir: path.join(root, `worktrees-${n}`),
  });
}

const head = async (cwd: string) => (await git(['rev-parse', 'HEAD'], { cwd })).stdout.trim();

/** Worktree paths registered in a mirror (the bare mirror itself excluded). */
async function registered(mirror: string): Promise<string[]> {
  const out = (await git(['worktree', 'list', '--porcelain'], { cwd: mirror })).stdout;
  const blocks = out.split('\n\n').filter((b) => b.trim() !== '' && !b.includes('\nbare'));
  return blocks.map((b) => b.split('\n')[0]!.replace(/^worktree /, '')).sort();
}

beforeAll(async () => {
  ({ dir: root, cleanup } = await tempDir());
  source = await makeSourceRepo(path.join(root, 'source'), {
    'README.md': '# demo\n',
    'src/app.py': 'def answer():\n    return 41\n',
  });
  await git(['tag', 'v1'], { cwd: source.path });
});

afterAll(async () => cleanup());

describe('git runner', () => {
  it('throws GitError with stderr, or returns the exit code when allowFail', async () => {
    const err = await git(['rev-parse', '--verify', 'nope'], { cwd: source.path }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitError);
    expect((err as GitError).exitCode).toBe(128);
    expect((err as GitError).message).toMatch(/Needed a single revision/);
    const res = await git(['rev-parse', '--verify', 'nope'], { cwd: source.path, allowFail: true });
    expect(res.exitCode).toBe(128);
  });

  it('a source repository missing an object fails with one plain sentence, not raw git output', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'missing-object-'));
    try {
      await git(['init', '-q', '-b', 'main', 'r'], { cwd: dir });
      const repo = path.join(dir, 'r');
      writeFileSync(path.join(repo, 'a.txt'), 'hi\n');
      await git(['add', 'a.txt'], { cwd: repo });
      await git(['commit', '-qm', 'x'], { cwd: repo });
      const blob = (await git(['rev-parse', 'HEAD:a.txt'], { cwd: repo })).stdout.trim();
      rmSync(path.join(repo, '.git/objects', blob.slice(0, 2), blob.slice(2)));
      const err = await git(['worktree', 'add', '-q', '--detach', path.join(dir, 'w'), 'HEAD'], {
        cwd: repo,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GitError);
      expect((err as GitError).message).toBe(
        `The source repository is missing an object (a.txt, ${blob.slice(0, 12)}): it is incomplete or damaged, so this commit cannot be checked out; repair or re-clone it.`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('commits with the fixed identity and hides host credentials', async () => {
    const saved = { ...process.env };
    process.env.GITHUB_TOKEN = 'ghp_shouldNeverReachGit';
    process.env.GIT_AUTHOR_NAME = 'Host User';
    try {
      const env = (await git(['var', 'GIT_AUTHOR_IDENT'], { cwd: source.path })).stdout;
      expect(env).toMatch(/^AgenticFix <agenticfix@users\.noreply\.github\.com>/);
      const helper = await git(['config', '--get-all', 'credential.helper'], {
        cwd: source.path,
        allowFail: true,
      });
      expect(helper.stdout.trim()).toBe('');
      const seen = (await git(['-c', 'alias.penv=!env', 'penv'], { cwd: source.path })).stdout;
      expect(seen).toContain('GIT_TERMINAL_PROMPT=0');
      expect(seen).not.toContain('GITHUB_TOKEN');
      expect(seen).not.toContain('Host User');
    } finally {
      process.env = saved;
    }
  });

  it('passes per-call config through the environment, never on the command line or to disk', async () => {
    const tmp = await tempDir();
    const { path: repo } = await makeSourceRepo(tmp.dir, { 'a.txt': 'a\n' });
    const header = 'Authorization: Basic c2VjcmV0';
    const got = await git(['config', '--get', 'http.extraHeader'], {
      cwd: repo,
      config: [['http.extraHeader', header]],
    });
    expect(got.stdout.trim()).toBe(header);
    // The forced settings still hold alongside the extra one, and nothing was written.
    const hooks = await git(['config', '--get', 'core.hooksPath'], { cwd: repo, config: [['x.y', 'z']] });
    expect(hooks.stdout.trim()).toBe('/dev/null');
    expect(await readFile(path.join(repo, '.git', 'config'), 'utf8')).not.toContain('extraHeader');
    await tmp.cleanup();
  });

  it('strips credentials from error messages', async () => {
    const err = (await git(['ls-remote', 'https://user:secret-token@127.0.0.1:1/x.git'], { cwd: root }).catch(
      (e: unknown) => e,
    )) as GitError;
    expect(err).toBeInstanceOf(GitError);
    expect(err.message).not.toContain('secret-token');
  });
});

describe('GitWorkspaceManager', () => {
  it('maps spellings of one remote to one mirror, without credentials', () => {
    const m = freshManager();
    expect(m.mirrorPath(source.path)).toBe(m.mirrorPath(`${source.path}/`));
    expect(normalizeRemote('https://x-access-token:abc@GitHub.com/o/r.git')).toBe('https://github.com/o/r');
    expect(m.mirrorPath('https://github.com/o/r')).toBe(m.mirrorPath('https://tok@github.com/o/r.git/'));
    expect(m.mirrorPath('https://github.com/o/r')).not.toBe(m.mirrorPath('https://github.com/o/s'));
  });

  it('resolves branches, tags and short SHAs to full SHAs; unknown revisions fail clearly', async () => {
    const m = freshManager();
    expect(await m.resolve(source.path, 'main')).toBe(source.head);
    expect(await m.resolve(source.path, 'v1')).toBe(source.head);
    expect(await m.resolve(source.path, source.head.slice(0, 8))).toBe(source.head);
    await expect(m.resolve(source.path, 'no-such-branch')).rejects.toThrow(
      /unknown revision 'no-such-branch'/,
    );
    await expect(m.resolve(source.path, '--upload-pack=evil')).rejects.toThrow();
  });

  it('requires a full SHA and a safe run id', async () => {
    const m = freshManager();
    await expect(m.create(source.path, source.head.slice(0, 12), 'r1')).rejects.toThrow(/full 40-hex SHA/);
    await expect(m.create(source.path, source.head, '../escape')).rejects.toThrow(/safe directory name/);
    await expect(m.create(source.path, 'f'.repeat(40), 'r2')).rejects.toThrow(/not found/);
  });

  it('isolates worktrees from each other and from the dirty source repository', async () => {
    const m = freshManager();
    // Dirty the source: tracked edit, staged new file, untracked file.
    await writeFiles(source.path, { 'README.md': '# dirty\n', 'staged.txt': 's\n', 'untracked.txt': 'u\n' });
    await git(['add', 'staged.txt'], { cwd: source.path });
    try {
      const a = await m.create(source.path, source.head, 'a');
      const b = await m.create(source.path, source.head, 'b');
      for (const wt of [a, b]) {
        expect(await readFile(path.join(wt.path, 'README.md'), 'utf8')).toBe('# demo\n');
        expect(existsSync(path.join(wt.path, 'staged.txt'))).toBe(false);
        expect(existsSync(path.join(wt.path, 'untracked.txt'))).toBe(false);
        expect(await head(wt.path)).toBe(source.head);
      }
      await writeFile(path.join(a.path, 'src/app.py'), 'changed\n');
      await writeFile(path.join(a.path, 'new.txt'), 'n\n');
      await git(['add', 'new.txt'], { cwd: a.path });
      expect(await readFile(path.join(b.path, 'src/app.py'), 'utf8')).toBe('def answer():\n    return 41\n');
      expect(existsSync(path.join(b.path, 'new.txt'))).toBe(false);
      expect((await git(['status', '--porcelain'], { cwd: b.path })).stdout).toBe('');
      expect((await git(['diff', '--cached', '--name-only'], { cwd: a.path })).stdout).toBe('new.txt\n');
      // Objects are shared through the mirror; indexes are per worktree.
      const gitPath = async (cwd: string, p: string) =>
        path.resolve(cwd, (await git(['rev-parse', '--git-path', p], { cwd })).stdout.trim());
      expect(await gitPath(a.path, 'objects')).toBe(await gitPath(b.path, 'objects'));
      expect(await gitPath(a.path, 'index')).not.toBe(await gitPath(b.path, 'index'));
    } finally {
      await git(['reset', '-q', '--hard'], { cwd: source.path });
      await git(['clean', '-qfd'], { cwd: source.path });
    }
  });

  it('creates many worktrees concurrently from a fresh cache', async () => {
    const cacheDir = path.join(root, 'cache-concurrent');
    const worktreeDir = path.join(root, 'worktrees-concurrent');
    // Two instances share the cache, as two processes would: they meet only at the file lock.
    const managers = [0, 1].map(() => new GitWorkspaceManager({ cacheDir, worktreeDir }));
    const ids = Array.from({ length: 10 }, (_, i) => `par-${i}`);
    const wts = await Promise.all(ids.map((id, i) => managers[i % 2]!.create(source.path, source.head, id)));
    const mirror = wts[0]!.mirror;
    expect(new Set(wts.map((w) => w.mirror)).size).toBe(1);
    expect(await registered(mirror)).toEqual(wts.map((w) => w.path).sort());
    const indexes = new Set<string>();
    for (const wt of wts) {
      expect(await head(wt.path)).toBe(source.head);
      expect(await readFile(path.join(wt.path, 'src/app.py'), 'utf8')).toBe('def answer():\n    return 41\n');
      expect((await git(['status', '--porcelain'], { cwd: wt.path })).stdout).toBe('');
      indexes.add((await git(['rev-parse', '--git-path', 'index'], { cwd: wt.path })).stdout.trim());
    }
    expect(indexes.size).toBe(wts.length);
    expect((await readdir(cacheDir)).filter((f) => f.includes('.tmp-'))).toEqual([]);
    await Promise.all(wts.map((wt, i) => managers[i % 2]!.remove(wt)));
    expect(await registered(mirror)).toEqual([]);
  });

  it('keeps the worktree pinned at its base while the source moves on and the mirror is refetched', async () => {
    const m = freshManager();
    const pinned = await m.create(source.path, source.head, 'pinned');
    await writeFiles(source.path, { 'README.md': '# v2\n' });
    const second = await commitAll(source.path, 'second');
    // create() fetches by itself when the commit is missing from the mirror.
    const later = await m.create(source.path, second, 'later');
    expect(await readFile(path.join(later.path, 'README.md'), 'utf8')).toBe('# v2\n');
    await writeFiles(source.path, { 'README.md': '# v3\n' });
    const third = await commitAll(source.path, 'third');
    expect(await m.resolve(source.path, 'main')).toBe(third);
    expect(await head(pinned.path)).toBe(source.head);
    expect(await readFile(path.join(pinned.path, 'README.md'), 'utf8')).toBe('# demo\n');
    expect(await head(later.path)).toBe(second);
    const again = await m.create(source.path, source.head, 'again');
    expect(await head(again.path)).toBe(source.head);
    await git(['reset', '-q', '--hard', source.head], { cwd: source.path });
  });

  it('mirror() with a commit the mirror already holds fetches nothing: the remote is not even reached', async () => {
    const m = freshManager();
    await m.mirror(source.path);
    const away = `${source.path}-away`;
    await rename(source.path, away);
    try {
      await expect(m.mirror(source.path, [], source.head)).resolves.toBe(m.mirrorPath(source.path));
      await expect(m.mirror(source.path, [], 'f'.repeat(40))).rejects.toThrow(); // missing: it must fetch
      await expect(m.mirror(source.path)).rejects.toThrow(); // no commit named: always fetches
    } finally {
      await rename(away, source.path);
    }
  });

  it('removes a worktree through git, leaving others and no stray admin entries', async () => {
    const m = freshManager();
    const keep = await m.create(source.path, source.head, 'keep');
    const gone = await m.create(source.path, source.head, 'gone');
    await writeFiles(gone.path, { 'node_modules/x/index.js': 'x', 'scratch.txt': 'dirty' });
    await m.remove(gone);
    expect(existsSync(gone.path)).toBe(false);
    expect(await registered(gone.mirror)).toEqual([keep.path]);
    expect(await readdir(path.join(gone.mirror, 'worktrees'))).toEqual(['keep']);
    expect(await head(keep.path)).toBe(source.head);
    // A worktree whose directory vanished is still cleaned from the mirror's admin entries.
    const vanished = await m.create(source.path, source.head, 'vanished');
    await rm(vanished.path, { recursive: true });
    await m.remove(vanished);
    expect(await registered(vanished.mirror)).toEqual([keep.path]);
  });
});
