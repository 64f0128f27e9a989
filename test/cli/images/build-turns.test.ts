import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../support/app.js';

/**
 * Two worker processes on one Docker engine that needed the same environment image at once both built
 * it: builds took turns within a process only (images/turns.ts). Here each process is a real one running
 * the built Turns as the builder does (take the image's turn, build unless the image is there, end the
 * turn), with a "build" that writes the image file: processes share nothing but the lock directory.
 */

const TURNS = fileURLToPath(new URL('../../../dist/images/turns.js', import.meta.url));
const TAG = 'agenticfix-env:0123456789abcdef0123';

/** `hold`: takes the turn, says so, and never ends it (a worker that hangs or dies mid-build). */
const CHILD = `
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
const { Turns } = await import(process.env.TURNS);
const [dir, image, log, mode] = process.argv.slice(1);
const say = (what) => appendFileSync(log, \`\${what} \${process.pid}\\n\`);
const turns = new Turns({ dir, pollMs: 50, staleMs: 2000 });
const end = await turns.take(${JSON.stringify(TAG)});
if (mode === 'hold') { say('holding'); setInterval(() => {}, 1000); }
else {
  if (existsSync(image)) say('cached');
  else { say('built'); await new Promise((r) => setTimeout(r, 1500)); writeFileSync(image, 'image'); }
  end();
}
`;

describe('builds of one image by two processes on one engine', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'build-turns-'));
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const image = () => path.join(dir, 'image');
  const log = () => path.join(dir, 'log');
  const said = () => (existsSync(log()) ? readFileSync(log(), 'utf8').split('\n').filter(Boolean) : []);
  const start = (mode: 'build' | 'hold' = 'build') => {
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', CHILD, path.join(dir, 'locks'), image(), log(), mode],
      { env: { ...process.env, TURNS }, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    children.push(child);
    return child;
  };
  const exited = (c: ChildProcess) =>
    new Promise<number | null>((resolve) => {
      if (c.exitCode !== null) resolve(c.exitCode);
      else c.once('exit', (code) => resolve(code));
    });

  it('asked at once, the image is built once: the second waits for the first, then finds it', async () => {
    const both = [start(), start()];
    expect(await Promise.all(both.map(exited))).toEqual([0, 0]);
    const lines = said();
    expect(lines.map((l) => l.split(' ')[0]).sort()).toEqual(['built', 'cached']);
  }, 30_000);

  it('a holder that died (its lock no longer refreshed) has its lock taken over: no one waits forever', async () => {
    const holder = start('hold');
    await waitFor(() => said().some((l) => l.startsWith('holding')), 10_000);
    const waiter = start();
    // While the holder lives, the waiter waits.
    await new Promise((r) => setTimeout(r, 2500));
    expect(said().filter((l) => !l.startsWith('holding'))).toEqual([]);
    holder.kill('SIGKILL');
    expect(await exited(waiter)).toBe(0);
    expect(said()[1]).toBe(`built ${waiter.pid}`);
    expect(existsSync(image())).toBe(true);
  }, 30_000);
});
