import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../../src/config/config.js';
import { prepareHost } from '../../../src/pipeline/startup.js';
import { renderObservation } from '../../../src/tools/observation.js';
import { ok } from '../../../src/tools/types.js';
import { measureTree, removeTree } from '../../../src/workspace/tree.js';
import { tempDir } from '../../support/git-fixtures.js';
import { compose } from '../../../src/cli/compose.js';

/**
 * Issue 35: trees of any shape. What tests (or `run_command`) can leave in a worktree — a directory chain
 * deeper than PATH_MAX, directories of mode 000, hundreds of thousands of files — is measured, handed
 * back and removed like any other tree, and never stops a start-up. The runs through a real sandbox are
 * in sandbox-corpus.test.ts.
 */

const MiB = 1024 * 1024;
const NAME = 'd'.repeat(200);
/** 40 levels of 201 bytes: 8,040 bytes below the root, twice PATH_MAX. */
const LEVELS = 40;

let tmp: { dir: string; cleanup: () => Promise<void> };
beforeAll(async () => {
  tmp = await tempDir('agenticfix-trees-');
});
afterAll(async () => {
  await removeTree(tmp.dir);
  await tmp.cleanup();
});

/** A chain deeper than PATH_MAX below `dir`, made as a test would (relative steps), `bottom` run at its end. */
function deepChain(dir: string, bottom: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync(
    'sh',
    ['-c', `for i in $(seq 1 ${LEVELS}); do mkdir ${NAME} && cd -P ${NAME} || exit 1; done; ${bottom}`],
    {
      cwd: dir,
    },
  );
}

describe('trees deeper than PATH_MAX', () => {
  it('are measured to the bottom and removed', async () => {
    const dir = path.join(tmp.dir, 'measure');
    // A sparse file counts by its size: 300 MB that take no space here.
    deepChain(dir, 'truncate -s 300M big');
    const m = await measureTree(dir, { maxBytes: 50 * MiB, maxEntries: 1000 });
    expect(m.over).toBe('bytes');
    expect(m.bytes).toBeGreaterThan(300 * MiB);
    const within = await measureTree(dir, { maxBytes: 400 * MiB, maxEntries: 1000 });
    expect(within).toMatchObject({ over: null, entries: LEVELS + 1 });
    await removeTree(dir);
    expect(existsSync(dir)).toBe(false);
  });

  it('a start-up on a home holding deep-chain worktrees (a run and its judge) starts and removes them', async () => {
    const home = path.join(tmp.dir, 'home');
    const config = loadConfig({ AGENTICFIX_HOME: home, AGENTICFIX_MAX_WORKTREE_MB: '50' }, tmp.dir);
    // What a killed run left: its worktree and a judge cell's, lent by a process that is gone, 300 MB
    // at the bottom of a chain deeper than PATH_MAX (the old start-up stopped with ENAMETOOLONG).
    const dead = `${hostname()}:999999999:1`;
    const uid = process.getuid?.() ?? 0;
    const gid = process.getgid?.() ?? 0;
    const names = ['run-deep', 'run-deep-verify-patched'];
    for (const name of names) {
      const wt = path.join(config.worktreeDir, name);
      deepChain(wt, 'truncate -s 300M big');
      writeFileSync(
        path.join(config.worktreeDir, `.${name}.lent.json`),
        JSON.stringify({ worktree: wt, uid, gid, owner: dead }),
      );
    }
    const kept = path.join(config.worktreeDir, 'run-kept');
    mkdirSync(kept);
    writeFileSync(path.join(kept, 'f'), 'x');

    const cleanup = await prepareHost({ config, workspaces: compose(config).workspaces, docker: false });
    expect(cleanup.quarantined_worktrees.map((q) => q.worktree).sort()).toEqual(
      names.map((n) => path.join(config.worktreeDir, n)),
    );
    for (const q of cleanup.quarantined_worktrees)
      expect(q.reason).toMatch(/grew past 50 MB \(AGENTICFIX_MAX_WORKTREE_MB\)/);
    // Set aside at once, removed in the background; the other worktree is left alone.
    for (const n of names) expect(existsSync(path.join(config.worktreeDir, n))).toBe(false);
    const deadline = Date.now() + 60_000;
    while (readdirSync(config.worktreeDir).some((n) => n.startsWith('.')) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(readdirSync(config.worktreeDir)).toEqual(['run-kept']);
    // The next start finds nothing left to do.
    expect(
      (await prepareHost({ config, workspaces: compose(config).workspaces, docker: false }))
        .quarantined_worktrees,
    ).toEqual([]);
  }, 120_000);
});

describe('results with huge lists', () => {
  it('an observation of 250,000 paths is cut, not a stack overflow', () => {
    const files = Array.from({ length: 250_000 }, (_, i) => `many/${i}`);
    const text = renderObservation(ok({ files, preview: 'x' }, false), 2000);
    expect(text.length).toBeLessThanOrEqual(2000);
    const parsed = JSON.parse(text) as { truncated: boolean; data: { files: string[] } };
    expect(parsed.truncated).toBe(true);
    expect(parsed.data.files[0]).toBe('many/0');
    expect(parsed.data.files.join('\n')).toMatch(/entries cut/);
  });
});
