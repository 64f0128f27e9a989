import { mkdtempSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OutputCapture } from '../../../src/environment/capture.js';
import { LocalSandbox } from '../../../src/environment/local.js';
import type { RunRequest } from '../../../src/environment/types.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sandbox-local-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sandbox = new LocalSandbox();
const req = (argv: string[], over: Partial<RunRequest> = {}): RunRequest => ({
  argv,
  worktree: dir,
  timeoutMs: 20_000,
  maxOutputBytes: 64 * 1024,
  ...over,
});
const node = (code: string) => [process.execPath, '-e', code];

/** Dead, or a zombie nobody reaped yet (as in a container whose init does not reap). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
}

/** A child that starts a sleeping grandchild, records both pids, then sleeps itself. */
const FAMILY = `
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const g = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
fs.writeFileSync('pids.json', JSON.stringify({ child: process.pid, grandchild: g.pid }));
console.log('started');
setTimeout(() => {}, 60000);
`;

const waitFor = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
};

describe('LocalSandbox', () => {
  it('says plainly that it does not isolate', () => {
    expect(sandbox.kind).toBe('local');
    expect(sandbox.describe()).toMatchObject({ isolation: 'none' });
  });

  it('runs argv without a shell in the worktree and reports status and exit code', async () => {
    const ok = await sandbox.run(req(['echo', '$HOME;', '`id`', '|', 'x']));
    expect(ok).toMatchObject({
      status: 'passed',
      exit_code: 0,
      timed_out: false,
      stdout: '$HOME; `id` | x\n',
    });
    const cwd = await sandbox.run(req(node('console.log(process.cwd()); process.exit(3)')));
    expect(cwd).toMatchObject({ status: 'failed', exit_code: 3, stdout: `${dir}\n` });
    const missing = await sandbox.run(req(['definitely-not-a-command-xyz']));
    expect(missing.status).toBe('error');
    expect(missing.detail).toMatch(/ENOENT/);
  });

  it('passes only PATH, HOME (a fresh temp dir) and LANG: no inherited secrets', async () => {
    process.env.AGENTICFIX_MODEL_API_KEY = 'sk-test-secret-value-123456';
    process.env.GITHUB_TOKEN = 'ghp_notarealtokenbutlongenough000000';
    try {
      const r = await sandbox.run(req(node('console.log(JSON.stringify(process.env))')));
      const env = JSON.parse(r.stdout) as Record<string, string>;
      expect(Object.keys(env).sort()).toEqual(['HOME', 'LANG', 'PATH']);
      expect(env.HOME).not.toBe(process.env.HOME);
      expect(existsSync(env.HOME as string)).toBe(false); // removed after the run
      expect(r.stdout).not.toContain('sk-test-secret');
    } finally {
      delete process.env.AGENTICFIX_MODEL_API_KEY;
      delete process.env.GITHUB_TOKEN;
    }
  });

  it('kills the whole process group on timeout (grandchild too)', async () => {
    const r = await sandbox.run(req(node(FAMILY), { timeoutMs: 1500 }));
    expect(r).toMatchObject({ status: 'timeout', timed_out: true, exit_code: null });
    expect(r.stdout).toContain('started');
    expect(r.duration_ms).toBeLessThan(10_000);
    const pids = JSON.parse(readFileSync(path.join(dir, 'pids.json'), 'utf8')) as Record<string, number>;
    await waitFor(() => !alive(pids.child!) && !alive(pids.grandchild!));
    expect(alive(pids.child!)).toBe(false);
    expect(alive(pids.grandchild!)).toBe(false);
  });

  it('cancels on abort, killing the group', async () => {
    writeFileSync(path.join(dir, 'pids.json'), '{}');
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 1000);
    const r = await sandbox.run(req(node(FAMILY), { signal: ac.signal }));
    expect(r.status).toBe('cancelled');
    expect(r.duration_ms).toBeLessThan(10_000);
    const pids = JSON.parse(readFileSync(path.join(dir, 'pids.json'), 'utf8')) as Record<string, number>;
    await waitFor(() => !alive(pids.grandchild!));
    expect(alive(pids.grandchild!)).toBe(false);
    const before = await sandbox.run(req(['echo', 'never'], { signal: AbortSignal.abort() }));
    expect(before).toMatchObject({ status: 'cancelled', stdout: '' });
  });

  it('caps each stream and says how much was dropped', async () => {
    const r = await sandbox.run(
      req(
        node(
          "process.stdout.write('x'.repeat(5 * 1024 * 1024) + '\\n2 failed, 3 passed'); process.stderr.write('small')",
        ),
        { maxOutputBytes: 100_000 },
      ),
    );
    expect(r.status).toBe('passed');
    expect(r.stdout_truncated).toBe(true);
    // Head and tail are kept: the closing line survives.
    expect(r.stdout.startsWith('x'.repeat(50_000) + '\n[... ')).toBe(true);
    expect(r.stdout).toContain(`[... ${5 * 1024 * 1024 + 19 - 100_000} bytes truncated ...]\nxxx`);
    expect(r.stdout.endsWith('x\n2 failed, 3 passed')).toBe(true);
    expect(r.stdout.length).toBeLessThan(100_100);
    expect(r.summary).toMatchObject({ passed: 3, failed: 2 });
    expect(r).toMatchObject({ stderr: 'small', stderr_truncated: false });
  });

  it('summarises a real node --test run', async () => {
    writeFileSync(
      path.join(dir, 'calc.test.mjs'),
      "import test from 'node:test';\nimport assert from 'node:assert';\n" +
        "test('a', () => assert.equal(1 + 1, 2));\ntest('b', () => assert.equal(1 + 1, 3));\n",
    );
    const r = await sandbox.run(req([process.execPath, '--test', '--test-reporter=tap', 'calc.test.mjs']));
    expect(r.status).toBe('failed');
    expect(r.summary).toEqual({ passed: 1, failed: 1, errors: 0, skipped: 0, source: 'node-test' });
  });
});

describe('OutputCapture', () => {
  it('never splits a multi-byte character and counts what it dropped', async () => {
    const cap = new OutputCapture(10);
    const sink = cap.writable();
    await new Promise<void>((resolve) => sink.write(Buffer.from('abcd€€'), () => resolve())); // € is 3 bytes
    cap.push('€x');
    const r = cap.result();
    // Head: 'abcd' and 1 byte of a '€' (dropped); tail: the last 5 bytes, whose first is the end of a '€' (dropped).
    expect(r).toEqual({ text: 'abcd\n[... 6 bytes truncated ...]\n€x', bytes: 14, truncated: true });
    const many = new OutputCapture(6);
    for (const c of ['123', '456', '789', 'abc', 'de']) many.push(c);
    expect(many.result()).toEqual({
      text: '123\n[... 8 bytes truncated ...]\ncde',
      bytes: 14,
      truncated: true,
    });
    const exact = new OutputCapture(6);
    for (const c of ['12', '34', '56']) exact.push(c);
    expect(exact.result()).toEqual({ text: '123456', bytes: 6, truncated: false });
    const small = new OutputCapture(100);
    small.push('héllo');
    expect(small.result()).toEqual({ text: 'héllo', bytes: 6, truncated: false });
  });
});
