import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from '../workspace/git.js';
import { GitWorkspaceManager } from '../workspace/manager.js';
import type { BenchOptions } from './options.js';
import { pct, round } from './stats.js';

const MiB = 1024 * 1024;

/**
 * A warm mirror's fetch, as a run at a new base commit pays it: with nothing new and with one new
 * commit, from a local remote with some hundreds of refs (the network left out: what the app adds
 * around git is what is measured, the quarantine among it). Median and p90 of `rounds` fetches, in ms.
 */
export async function benchFetch(o: BenchOptions): Promise<Record<string, number>> {
  const rounds = o.smoke ? 2 : 15;
  const root = await mkdtemp(path.join(os.tmpdir(), 'agenticfix-bench-fetch-'));
  try {
    const source = path.join(root, 'source');
    await mkdir(source);
    const run = (...args: string[]) => git(args, { cwd: source });
    await run('init', '-q', '-b', 'main');
    for (let i = 0; i < 200; i++) await writeFile(path.join(source, `f${i}.txt`), `file ${i}\n`.repeat(50));
    await run('add', '-A');
    await run('commit', '-q', '-m', 'initial');
    const refs = Array.from({ length: o.smoke ? 10 : 500 }, (_, i) => `create refs/tags/t${i} HEAD\n`);
    await git(['update-ref', '--stdin'], { cwd: source, input: refs.join('') });
    const m = new GitWorkspaceManager({
      cacheDir: path.join(root, 'cache'),
      worktreeDir: path.join(root, 'worktrees'),
      limits: {
        maxWorktreeBytes: 64 * MiB,
        maxWorktreeEntries: 10_000,
        fetch: { timeoutMs: 60_000, maxBytes: 64 * MiB, maxFiles: 10_000 },
      },
    });
    await m.mirror(source); // the clone
    const timed = async (before: () => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < rounds; i++) {
        await before();
        const started = performance.now();
        await m.mirror(source);
        ms.push(performance.now() - started);
      }
      return [round(pct(ms, 50)), round(pct(ms, 90))] as const;
    };
    const nothingNew = await timed(async () => undefined);
    let n = 0;
    const oneCommit = await timed(async () => {
      await writeFile(path.join(source, 'f0.txt'), `change ${n++}\n`);
      await run('commit', '-q', '-a', '-m', `change ${n}`);
    });
    return {
      fetch_refs: refs.length + 1,
      fetch_warm_nothing_new_ms: nothingNew[0],
      fetch_warm_nothing_new_p90_ms: nothingNew[1],
      fetch_warm_one_commit_ms: oneCommit[0],
      fetch_warm_one_commit_p90_ms: oneCommit[1],
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
