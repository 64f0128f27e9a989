import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { git } from '../../../src/workspace/git.js';
import { GitWorkspaceManager } from '../../../src/workspace/manager.js';
import { makeSourceRepo, tempDir } from '../../support/git-fixtures.js';

/**
 * Worktrees made and given back with the mirror's lock held, their slow parts at once (issue 40).
 * A judge's cells get their worktrees from one `createMany` (issue 40): the checkouts run at once, each
 * still a fresh, clean tree of exactly the commit. Seen, not timed: a smudge filter in the mirror holds
 * each checkout until every cell's checkout has started (or gives up after 20 s, a bound for a loaded
 * machine, never reached once the checkouts overlap), and writes how many it saw.
 */
const CELLS = ['c-base', 'c-source', 'c-tests', 'c-patched'];

let root: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir: root, cleanup } = await tempDir()));
afterAll(async () => cleanup());

/** A source whose `held.txt` goes through filter `hold`, and a manager whose mirror defines it. */
async function heldSetup(name: string, script: (barrier: string) => string) {
  const source = await makeSourceRepo(path.join(root, `${name}-source`), {
    '.gitattributes': 'held.txt filter=hold\n',
    'held.txt': 'held\n',
    'src/app.py': 'def answer():\n    return 42\n',
  });
  const barrier = path.join(root, `${name}-barrier`);
  await mkdir(barrier);
  const filter = path.join(root, `${name}-smudge.sh`);
  writeFileSync(filter, script(barrier));
  chmodSync(filter, 0o755);
  const m = new GitWorkspaceManager({
    cacheDir: path.join(root, `${name}-cache`),
    worktreeDir: path.join(root, `${name}-worktrees`),
  });
  const mirror = await m.mirror(source.path);
  await git(['config', 'filter.hold.smudge', filter], { cwd: mirror });
  await git(['config', 'filter.hold.clean', 'cat'], { cwd: mirror });
  await git(['config', 'filter.hold.required', 'true'], { cwd: mirror });
  return { source, barrier, m, mirror };
}

describe('createMany', () => {
  it("checks out a judge's worktrees at once, each clean at the commit", async () => {
    const { source, barrier, m } = await heldSetup(
      'once',
      (b) => `#!/bin/sh
mktemp "${b}/started.XXXXXX" >/dev/null
i=0
while [ "$(ls "${b}" | grep -c started)" -lt ${CELLS.length} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
ls "${b}" | grep -c started > "$(mktemp "${b}/seen.XXXXXX")"
exec cat
`,
    );
    const wts = await m.createMany(source.path, source.head, CELLS);
    const seen = readdirSync(barrier)
      .filter((f) => f.startsWith('seen.'))
      .map((f) => readFileSync(path.join(barrier, f), 'utf8').trim());
    // One after another, the first checkout waits alone and sees only itself.
    expect(seen).toEqual(CELLS.map(() => String(CELLS.length)));
    for (const wt of wts) {
      const at = { cwd: wt.path, env: { GIT_DIR: wt.gitDir, GIT_WORK_TREE: wt.path } };
      expect((await git(['rev-parse', 'HEAD'], at)).stdout.trim()).toBe(source.head);
      expect((await git(['status', '--porcelain', '--ignored'], at)).stdout).toBe('');
      expect(readFileSync(path.join(wt.path, 'src/app.py'), 'utf8')).toBe('def answer():\n    return 42\n');
    }
    await m.removeMany(wts);
  });

  it('a checkout that fails leaves none of the worktrees behind, nor any admin entry', async () => {
    const { source, mirror, m } = await heldSetup(
      'fail',
      () => `#!/bin/sh
case "$PWD" in *c-tests) exit 1;; esac
exec cat
`,
    );
    await expect(m.createMany(source.path, source.head, CELLS)).rejects.toThrow(/held\.txt|smudge|hold/);
    const dir = path.join(root, 'fail-worktrees');
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
    expect((await git(['worktree', 'list', '--porcelain'], { cwd: mirror })).stdout.trim()).toBe(
      `worktree ${mirror}\nbare`,
    );
  });
});

/** Runs `fn` with `rm` on PATH replaced by `script` (removeTree runs `rm`), restored after. */
async function withRm<T>(name: string, script: (realRm: string) => string, fn: () => Promise<T>) {
  const bin = path.join(root, `${name}-bin`);
  await mkdir(bin);
  const realRm = execFileSync('sh', ['-c', 'command -v rm'], { encoding: 'utf8' }).trim();
  writeFileSync(path.join(bin, 'rm'), script(realRm));
  chmodSync(path.join(bin, 'rm'), 0o755);
  const saved = process.env.PATH;
  process.env.PATH = `${bin}:${saved}`;
  try {
    return await fn();
  } finally {
    process.env.PATH = saved;
  }
}

describe('removeMany', () => {
  it("prunes git's entry while the files are still being deleted", async () => {
    const source = await makeSourceRepo(path.join(root, 'rm-source'), { 'a.txt': 'a\n' });
    const worktreeDir = path.join(root, 'rm-worktrees');
    const m = new GitWorkspaceManager({ cacheDir: path.join(root, 'rm-cache'), worktreeDir });
    const [wt] = await m.createMany(source.path, source.head, ['agent-run']);
    const seen = path.join(root, 'rm-seen');
    // The deletion waits for git's entry to go (or gives up) and says which it saw.
    await withRm(
      'rm',
      (realRm) => `#!/bin/sh
i=0
while [ -e "${wt!.gitDir}" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
if [ -e "${wt!.gitDir}" ]; then echo present >> "${seen}"; else echo pruned >> "${seen}"; fi
exec "${realRm}" "$@"
`,
      () => m.removeMany([wt!]),
    );
    expect(readFileSync(seen, 'utf8')).toBe('pruned\n');
    expect(readdirSync(worktreeDir)).toEqual([]);
    expect((await git(['worktree', 'list', '--porcelain'], { cwd: wt!.mirror })).stdout.trim()).toBe(
      `worktree ${wt!.mirror}\nbare`,
    );
  });

  it('files that resist fail the removal and stay set aside for the start-up sweep', async () => {
    const source = await makeSourceRepo(path.join(root, 'stuck-source'), { 'a.txt': 'a\n' });
    const worktreeDir = path.join(root, 'stuck-worktrees');
    const m = new GitWorkspaceManager({ cacheDir: path.join(root, 'stuck-cache'), worktreeDir });
    const [wt] = await m.createMany(source.path, source.head, ['agent-run']);
    const failed = withRm(
      'stuck',
      () => '#!/bin/sh\necho "rm: cannot remove: Operation not permitted" >&2\nexit 1\n',
      () => m.removeMany([wt!]),
    );
    await expect(failed).rejects.toThrow(/cannot remove/);
    const [left, ...more] = readdirSync(worktreeDir);
    expect(more).toEqual([]);
    expect(left).toMatch(/^\.quarantine\.agent-run\./);
    expect(await m.removeQuarantined()).toEqual([path.join(worktreeDir, left!)]);
    expect(readdirSync(worktreeDir)).toEqual([]);
  });
});
