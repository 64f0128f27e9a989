import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { needDocker } from './support/docker.js';
import { describeIf } from './support/skip.js';

/**
 * Issue 29's Done-when: `agenticfix demo --serve --json` runs the demo, prints one object with `run_url`
 * and `sign_in_url`, and keeps serving: the sign-in URL signs the emulated maintainer in through the
 * OAuth web flow and lands on the finished run's page; SIGINT stops it. Runs the built CLI (dist/).
 */
describeIf(await needDocker())('demo --serve', () => {
  it('prints the run page and a sign-in URL, serves the page, and stops on SIGINT', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'demo-serve-'));
    const child = spawn(process.execPath, [path.resolve('dist/cli/index.js'), 'demo', '--serve', '--json'], {
      cwd: dir,
      env: { ...process.env, AGENTICFIX_HOME: '.af', AGENTICFIX_RUNS_DIR: 'runs' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let out = '';
      const summary = await new Promise<{ result: string; run_url: string; sign_in_url: string }>(
        (resolve, reject) => {
          child.stdout.on('data', (d: Buffer) => {
            out += String(d);
            const line = out.split('\n').find((l) => l.startsWith('{'));
            if (line && out.includes('\n')) resolve(JSON.parse(line));
          });
          void exited.then((code) => reject(new Error(`demo exited ${code} before printing: ${out}`)));
        },
      );
      expect(summary.result).toBe('success');
      expect(summary.run_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/runs\/[\w-]+$/);
      let url = summary.sign_in_url;
      let cookie = '';
      for (let hop = 0; hop < 5 && !cookie; hop++) {
        const res = await fetch(url, { redirect: 'manual' });
        cookie = res.headers.get('set-cookie')?.split(';')[0] ?? '';
        url = new URL(res.headers.get('location')!, url).toString();
      }
      expect(url).toBe(summary.run_url);
      const page = await (await fetch(url, { headers: { cookie } })).text();
      expect(page).toContain('Signed in as <strong>maintainer-mona</strong>');
      expect(page).toContain('<code>build_environment</code>');
      expect(page).toContain('d2h-file-wrapper'); // the diff
      expect(page).toContain('Verdict <strong>verified</strong>');
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
