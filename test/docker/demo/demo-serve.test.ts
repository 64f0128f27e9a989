import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEMO_ENV } from '../../support/demo.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { signInFlow } from '../../support/web.js';

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
      env: { ...process.env, ...DEMO_ENV },
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
      // Signed in as a browser would: the sign-in's state cookie, then the session cookie.
      const signIn = new URL(summary.sign_in_url);
      const { session: cookie, location } = await signInFlow(
        signIn.origin,
        signIn.searchParams.get('login')!,
        signIn.searchParams.get('next')!,
      );
      const url = new URL(location, signIn).toString();
      expect(url).toBe(summary.run_url);
      const page = await (await fetch(url, { headers: { cookie } })).text();
      expect(page).toContain('Signed in as <strong>maintainer-mona</strong>');
      expect(page).toContain('<code>build_environment</code>');
      expect(page).toContain('d2h-file-wrapper'); // the diff
      expect(page).toContain('Verdict <strong>verified</strong>');
      await scrapeAfterTheDemo(new URL(summary.run_url).origin);
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});

const VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

/** Every `agenticfix_*` metric the dashboard and the alert rules use (histogram series by their base name). */
function metricsUsed(): string[] {
  const text =
    readFileSync('ops/grafana/agenticfix.json', 'utf8') + readFileSync('ops/prometheus/alerts.yml', 'utf8');
  const names = [...text.matchAll(/\bagenticfix_[a-z_]+\b/g)].map((m) =>
    m[0].replace(/_(bucket|sum|count)$/, ''),
  );
  return [...new Set(names)].sort();
}

/**
 * Issue 38's Done-when: /metrics after a demo run (serve's path) has the run's cost, the judge and
 * publish phases and label-to-PR, the store-wide gauges once, build_info agreeing with package.json
 * (as do --version and /healthz), and every metric the dashboard and the alert rules use.
 */
async function scrapeAfterTheDemo(origin: string): Promise<void> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  expect(text).toMatch(/^agenticfix_cost_usd_total\{model="[^"]+"\} 0\.\d*[1-9]/m);
  for (const phase of ['workspace', 'environment', 'agent', 'judge', 'publish'])
    expect(text).toContain(`agenticfix_run_phase_seconds_count{phase="${phase}"} 1`);
  expect(text).toContain('agenticfix_label_to_pr_seconds_count 1');
  expect(text.match(/^agenticfix_queue_depth\b.*$/gm)).toEqual(['agenticfix_queue_depth 0']);
  const runs = text.match(/^agenticfix_runs\{.*$/gm)!;
  expect(runs.map((l) => /state="(\w+)"/.exec(l)![1]).sort()).toEqual([
    'publish_pending',
    'queued',
    'running',
  ]);
  expect(text).toMatch(
    new RegExp(
      `^agenticfix_build_info\\{version="${VERSION.replace(/\./g, '\\.')}",commit="\\w+",node="${process.version}"\\} 1$`,
      'm',
    ),
  );
  const exported = new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]));
  const used = metricsUsed();
  expect(used.length).toBeGreaterThan(8);
  expect(used.filter((n) => !exported.has(n))).toEqual([]);
  const health = (await (await fetch(`${origin}/healthz`)).json()) as { version: string };
  expect(health.version).toBe(VERSION);
  expect(execFileSync(process.execPath, ['dist/cli/index.js', '--version'], { encoding: 'utf8' })).toMatch(
    new RegExp(`^agenticfix ${VERSION.replace(/\./g, '\\.')} \\(commit \\w+, node ${process.version}\\)\n$`),
  );
}
