import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from '../../src/workspace/git.js';

/** A scratch directory removed by the returned cleanup. */
export async function tempDir(
  prefix = 'agenticfix-test-',
): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes files (path → content) relative to `root`, creating directories. */
export async function writeFiles(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(root, rel);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content);
  }
}

/** Stages everything in `repo` and commits; returns the new full SHA. */
export async function commitAll(repo: string, message: string): Promise<string> {
  await git(['add', '-A'], { cwd: repo });
  await git(['commit', '-q', '-m', message], { cwd: repo });
  return (await git(['rev-parse', 'HEAD'], { cwd: repo })).stdout.trim();
}

/** A non-bare source repository on branch `main` with one commit of `files`. */
export async function makeSourceRepo(
  dir: string,
  files: Record<string, string | Buffer>,
): Promise<{ path: string; head: string }> {
  await mkdir(dir, { recursive: true });
  await git(['init', '-q', '-b', 'main'], { cwd: dir });
  await writeFiles(dir, files);
  return { path: dir, head: await commitAll(dir, 'initial') };
}
