import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../../src/config/config.js';
import { BuildStepFilter } from '../../../src/images/build-ca.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { readBuildOutput, readProgress } from '../../../src/images/build-progress.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/**
 * Issue 9, item 3: build output was accumulated in one string. 100 MB of RUN output took the
 * process to 331 MB; 700 MB ended it with `RangeError: Invalid string length`.
 */

const MiB = 1024 * 1024;
const cfg: Config['sandbox'] = loadConfig({}).sandbox;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function worktree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-build-'));
  dirs.push(dir);
  writeFileSync(path.join(dir, 'README'), 'x\n');
  return dir;
}

/** Highest RSS seen while `work` runs, above the RSS before it. */
async function rssGrowth<T>(work: () => Promise<T>): Promise<{ value: T; growth: number }> {
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  try {
    const value = await work();
    return { value, growth: Math.max(peak, process.memoryUsage().rss) - before };
  } finally {
    clearInterval(timer);
  }
}

describe('readProgress (the engine progress stream)', () => {
  const feed = (parts: (string | Buffer)[], max = MiB) => {
    const stream = new PassThrough();
    const events: unknown[] = [];
    const done = readProgress(stream, max, (ev) => events.push(ev));
    for (const p of parts) stream.write(p);
    stream.end();
    return { done, events };
  };

  it('parses entries split anywhere, skipping blank lines', async () => {
    const { done, events } = feed(['{"stream":"a\\n"}\n{"str', 'eam":"b\\n"}\r\n\n{"status":"s"}\n']);
    await done;
    expect(events).toEqual([{ stream: 'a\n' }, { stream: 'b\n' }, { status: 's' }]);
  });

  it('a line that is not JSON rejects the read; nothing is thrown from the stream handler', async () => {
    const { done } = feed(['{"stream":"a"}\n', 'not json at all\n', '{"stream":"b"}\n']);
    await expect(done).rejects.toThrow(/unreadable progress entry: not json at all/);
  });

  it('an entry without a newline cannot grow without bound', async () => {
    const { done } = feed([Buffer.alloc(2 * MiB, 'a')], 10 * MiB);
    await expect(done).rejects.toThrow(/progress entry over 1 MiB/);
  });

  it('stops at the output cap', async () => {
    const line = `${JSON.stringify({ stream: 'x'.repeat(1000) })}\n`;
    const { done, events } = feed(Array.from({ length: 2000 }, () => line));
    await expect(done).rejects.toThrow(/build output cap.*AGENTICFIX_BUILD_MAX_OUTPUT_MB/);
    expect(events.length).toBeLessThan(1100);
  });

  it('a stream error rejects the read', async () => {
    const stream = new PassThrough();
    const done = readProgress(stream, MiB, () => undefined);
    stream.destroy(new Error('socket hang up'));
    await expect(done).rejects.toThrow('the build stream broke off: socket hang up');
  });
});

/**
 * Issue 23, item 4: a RUN step printing hundreds of MB without a newline made the step filter
 * quadratic (it kept the whole unfinished line and searched all of it at every chunk): 4 MiB took
 * 28 s of event-loop time, and the 64 MiB cap never triggered in 400 s while RSS reached 900 MB.
 */
describe('newline-free build output', () => {
  /** The size of one write of a pipe: what the engine relays of a container's output at a time. */
  const PIECE = 4096;
  /** Progress entries as the engine sends them, for `bytes` of output without a newline; counts what was taken. */
  function engine(bytes: number) {
    const sent = { bytes: 0 };
    const entry = Buffer.from(`${JSON.stringify({ stream: 'a'.repeat(PIECE) })}\r\n`);
    function* entries() {
      yield Buffer.from(`${JSON.stringify({ stream: 'Step 1/1 : RUN yes | tr -d "\\n"\n' })}\r\n`);
      while (sent.bytes < bytes) {
        sent.bytes += entry.length;
        yield entry;
      }
    }
    return { stream: Readable.from(entries(), { objectMode: false }), sent };
  }

  it('the step filter passes a line on as it arrives and holds at most a few KiB of it', () => {
    const filter = new BuildStepFilter(0);
    let fed = 0;
    let passed = 0;
    let held = 0;
    for (const text of ['Step 1/1 : RUN yes\n', ...Array.from({ length: 1024 }, () => 'a'.repeat(PIECE))]) {
      fed += text.length;
      passed += filter.write(text).length;
      held = Math.max(held, fed - passed);
    }
    passed += filter.end().length;
    expect(passed).toBe(fed); // 4 MiB in one line, all of it passed on
    expect(held).toBeLessThanOrEqual(8192);
  });

  it('a step header split anywhere is still renumbered or hidden; a long header does not wait for its newline', () => {
    const header = 'Step 2/3 : RUN echo agenticfix-build-ca\n';
    for (let cut = 1; cut < header.length; cut++) {
      const filter = new BuildStepFilter(1);
      const out =
        filter.write(`Step 1/3 : FROM x\n${header.slice(0, cut)}`) +
        filter.write(`${header.slice(cut)}hidden output\nStep 3/3 : RUN make\nok`) +
        filter.end();
      expect(out).toBe('Step 1/2 : FROM x\nStep 2/2 : RUN make\nok');
    }
    const filter = new BuildStepFilter(0);
    const long = filter.write(`Step 1/1 : RUN echo ${'b'.repeat(PIECE)}`) + filter.write('b'.repeat(PIECE));
    expect(long).toMatch(/^Step 1\/1 : RUN echo b+$/);
    expect(long.length).toBeGreaterThan(PIECE);
  });

  it('through the real parsing path, the output cap triggers at its byte count and the log stays small', async () => {
    const cap = 16 * MiB;
    const { stream, sent } = engine(200_000_000);
    const { value: out, growth } = await rssGrowth(() => readBuildOutput(stream, cap, 0));
    expect(out.error).toMatch(/build output cap: the build printed more than 16 MiB/);
    // Stopped at the cap, whether or not a newline came (the stream reads ahead a few entries).
    expect(sent.bytes).toBeGreaterThan(cap);
    expect(sent.bytes).toBeLessThan(cap + 64 * PIECE);
    const log = out.log.result('failed');
    expect(log.head[0]).toBe('Step 1/1 : RUN yes | tr -d "\\n"');
    expect(log.head[1]).toMatch(/^a{400}…$/); // the 16 MiB line, clipped
    expect(log.error_lines.join('\n')).toMatch(/build output cap/);
    expect(JSON.stringify(log).length).toBeLessThan(4000);
    expect(growth).toBeLessThan(100 * MiB);
  });
});

describe('a broken engine ends the build as failed, never the process', () => {
  let server: Server;
  let socket: string;
  let mode: 'garbage' | 'hangup' = 'garbage';

  beforeAll(async () => {
    socket = path.join(mkdtempSync(path.join(tmpdir(), 'agenticfix-engine-')), 'docker.sock');
    dirs.push(path.dirname(socket));
    server = createServer((req, res) => {
      if (req.method === 'POST' && req.url?.includes('/build')) {
        req.resume();
        res.writeHead(200, { 'Content-Type': 'application/json' });
        // The engine (or a proxy in front of it) breaks off after one entry.
        res.write('{"stream":"Step 1/2 : FROM x\\n"}\n', () =>
          mode === 'garbage'
            ? res.end('<html>proxy error</html>\n')
            : setTimeout(() => res.socket?.destroy(), 100),
        );
        return;
      }
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end('{"message":"no such image"}');
    });
    await new Promise<void>((resolve) => server.listen(socket, resolve));
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it.each(['garbage', 'hangup'] as const)('%s', async (m) => {
    mode = m;
    // The fake engine knows no networks: the build goes to Docker's default bridge.
    const unrestricted = { ...cfg, buildNetwork: { mode: 'unrestricted' as const } };
    const builder = new DockerEnvironmentBuilder(new Docker({ socketPath: socket }), unrestricted);
    const res = await builder.build({ dockerfile: `FROM ${BASE_IMAGE}\n`, worktree: worktree(), runId: 'r' });
    expect(res.success).toBe(false);
    expect(res.log.head).toContain('Step 1/2 : FROM x');
    expect(res.error).toMatch(
      m === 'garbage' ? /unreadable progress entry: <html>/ : /the build stream broke off: aborted/,
    );
  });
});

describeIf(await needDocker())('noisy and endless builds (real engine)', () => {
  const docker = new Docker();
  const runId = `test-build-out-${process.pid}-${Date.now()}`;

  /** Containers (the classic builder's RUN containers) whose command carries `marker`. */
  const running = async (marker: string) =>
    (await docker.listContainers({ all: true })).filter((c) => c.Command.includes(marker));
  const gone = async (marker: string) => {
    for (let i = 0; i < 40 && (await running(marker)).length > 0; i++)
      await new Promise((r) => setTimeout(r, 250));
    return (await running(marker)).length === 0;
  };
  const noisy = (marker: string, bytes: number) =>
    `FROM ${BASE_IMAGE}\nRUN echo ${marker} && yes ${'a'.repeat(99)} | head -c ${bytes}\n`;

  afterAll(async () => {
    const gc = new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 1, imageMaxAgeMs: 1 });
    await gc.release(runId); // the run is over: its leases end, so GC can take its images
    await gc.gc({ runId });
  });

  it('700 MB of RUN output over a small cap: stopped with an output-cap error, bounded log and memory', async () => {
    const marker = `noisy-${runId}`;
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildMaxOutputBytes: 8 * MiB });
    const { value: res, growth } = await rssGrowth(() =>
      builder.build({ dockerfile: noisy(marker, 700_000_000), worktree: worktree(), runId }),
    );
    expect(res.success).toBe(false);
    expect(res.error).toMatch(/build output cap: the build printed more than 8 MiB/);
    expect(res.log.exit_status).toBe('failed');
    expect(res.log.error_lines.join('\n')).toMatch(/build output cap/);
    expect(res.log.total_lines).toBeGreaterThan(50_000);
    expect(JSON.stringify(res.log).length).toBeLessThan(40_000);
    expect(growth).toBeLessThan(200 * MiB);
    // Giving up the stream stopped the engine's build: its RUN container is gone.
    expect(await gone(marker)).toBe(true);
  }, 120_000);

  it('200 MB of RUN output without a newline over a small cap: stopped at the cap, bounded memory', async () => {
    const marker = `flat-${runId}`;
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildMaxOutputBytes: 8 * MiB });
    const { value: res, growth } = await rssGrowth(() =>
      builder.build({
        dockerfile: `FROM ${BASE_IMAGE}\nRUN echo ${marker} && yes a | tr -d '\\n' | head -c 200000000\n`,
        worktree: worktree(),
        runId,
      }),
    );
    expect(res.success).toBe(false);
    expect(res.error).toMatch(/build output cap: the build printed more than 8 MiB/);
    expect(res.log.error_lines.join('\n')).toMatch(/build output cap/);
    expect(res.log.truncated).toBe(true);
    expect(JSON.stringify(res.log).length).toBeLessThan(40_000);
    expect(growth).toBeLessThan(200 * MiB);
    expect(await gone(marker)).toBe(true);
  }, 120_000);

  it('700 MB of RUN output under a large cap: the build completes with a bounded log', async () => {
    const marker = `big-${runId}`;
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildMaxOutputBytes: 1024 * MiB });
    const started = Date.now();
    const { value: res, growth } = await rssGrowth(() =>
      builder.build({ dockerfile: noisy(marker, 700_000_000), worktree: worktree(), runId }),
    );
    console.log(`700 MB build: ${Date.now() - started} ms, RSS +${Math.round(growth / MiB)} MB`);
    expect(res).toMatchObject({ success: true, error: null });
    expect(res.log.total_lines).toBeGreaterThan(7_000_000);
    expect(JSON.stringify(res.log).length).toBeLessThan(40_000);
    expect(growth).toBeLessThan(200 * MiB);
  }, 300_000);

  it('the wall-clock limit aborts the build, and the engine stops it', async () => {
    const marker = `endless-${runId}`;
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildTimeoutMs: 5000 });
    const started = Date.now();
    const building = builder.build({
      dockerfile: `FROM ${BASE_IMAGE}\nRUN echo ${marker} && sleep 600\n`,
      worktree: worktree(),
      runId,
    });
    // The RUN container is seen while the build runs (so that "gone" below means something).
    let seen = false;
    for (let i = 0; i < 40 && !seen; i++) {
      seen = (await running(marker)).length > 0;
      if (!seen) await new Promise((r) => setTimeout(r, 100));
    }
    const res = await building;
    expect(seen).toBe(true);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(res).toMatchObject({ success: false, error: 'build timed out after 5000 ms' });
    expect(res.log.exit_status).toBe('timeout');
    expect(await gone(marker)).toBe(true);
  }, 60_000);
});
