import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import Docker from 'dockerode';
import { loadConfig } from '../config/config.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { dockerAvailable } from '../environment/docker.js';
import type { BenchOptions } from './options.js';

const MiB = 1024 * 1024;
/** The build that once ended the process with `RangeError: Invalid string length`. */
const OUTPUT_BYTES = 700_000_000;
const SMOKE_OUTPUT_BYTES = 20_000_000;
/** A step that prints without a newline once made the log quadratic (issue 23): the size that must end within limits. */
const FLAT_BYTES = 200_000_000;

/**
 * The engine with each build's progress stream timed: how long the app's reading of one chunk held
 * the event loop (`max`) and in all (`total`), from listeners around the builder's own.
 */
function timedBuilds(docker: Docker, writes: { max: number; total: number }): Docker {
  const timed = Object.create(docker) as Docker;
  timed.buildImage = (async (...args: Parameters<Docker['buildImage']>) => {
    const stream = (await docker.buildImage(...args)) as NodeJS.ReadableStream;
    let started = 0;
    const after = () => {
      const ms = performance.now() - started;
      writes.max = Math.max(writes.max, ms);
      writes.total += ms;
    };
    // Before the builder's listener is added; after it once it is (no chunk flows before the next tick).
    const added = (event: string) => {
      if (event !== 'data') return;
      stream.off('newListener', added);
      stream.prependListener('data', () => (started = performance.now()));
      queueMicrotask(() => stream.on('data', after));
    };
    stream.on('newListener', added);
    return stream;
  }) as Docker['buildImage'];
  return timed;
}

/**
 * A build whose RUN step prints 700 MB in lines and one that prints 200 MB without a newline: with
 * the output cap raised each completes (time, memory and log size are what matter); with the
 * configured cap each is stopped (time to stop). The event loop's busy time and longest stall show
 * whether reading the output blocks the app.
 */
export async function benchBuildOutput({ smoke }: BenchOptions): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { skipped: 'no Docker engine reachable' };
  const cfg = loadConfig().sandbox;
  const runId = `bench-output-${Date.now()}`;
  const bytes = smoke ? SMOKE_OUTPUT_BYTES : OUTPUT_BYTES;
  // The capped build must print more than its cap.
  const cap = Math.min(cfg.buildMaxOutputBytes, bytes / 2);
  const worktree = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-'));
  writeFileSync(path.join(worktree, 'README'), 'x\n');
  const lines = (n: number, size: number) =>
    `FROM ${cfg.baseImage}\nRUN echo ${runId}-${n} && yes ${'a'.repeat(99)} | head -c ${size}\n`;
  const flat = (n: number, size: number) =>
    `FROM ${cfg.baseImage}\nRUN echo ${runId}-${n} && yes a | tr -d '\\n' | head -c ${size}\n`;
  // Each holds leases on the images it built until released: the lease containers and the images they
  // keep from the GC below stayed on the engine after every run of this benchmark.
  const builders: DockerEnvironmentBuilder[] = [];
  const measure = async (dockerfile: string, maxOutput: number) => {
    const writes = { max: 0, total: 0 };
    const builder = new DockerEnvironmentBuilder(timedBuilds(docker, writes), {
      ...cfg,
      buildMaxOutputBytes: maxOutput,
    });
    builders.push(builder);
    const before = process.memoryUsage().rss;
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    const stalls = monitorEventLoopDelay({ resolution: 10 });
    stalls.enable();
    const busy = performance.eventLoopUtilization();
    const started = Date.now();
    const res = await builder.build({ dockerfile, worktree, runId, noCache: true });
    const loop = performance.eventLoopUtilization(busy);
    stalls.disable();
    clearInterval(timer);
    return {
      res,
      ms: Date.now() - started,
      rssMb: Math.round((peak - before) / MiB),
      peakRssMb: Math.round(peak / MiB),
      loopBusyMs: Math.round(loop.active),
      // The histogram records how late its timer ran: the longest time one callback held the loop.
      longestStallMs: Math.round(stalls.max / 1e6),
      maxWriteMs: Math.round(writes.max * 10) / 10,
      writesMs: Math.round(writes.total),
    };
  };
  try {
    const full = await measure(lines(1, bytes), 2 * bytes);
    const capped = await measure(lines(2, bytes), cap);
    const flatBytes = smoke ? SMOKE_OUTPUT_BYTES : FLAT_BYTES;
    const flatFull = await measure(flat(3, flatBytes), 2 * flatBytes);
    const flatCap = Math.min(cfg.buildMaxOutputBytes, flatBytes / 2);
    const flatCapped = await measure(flat(4, flatBytes), flatCap);
    return {
      output_mb: Math.round(bytes / MiB),
      uncapped_build_ms: full.ms,
      uncapped_success: String(full.res.success),
      uncapped_rss_growth_mb: full.rssMb,
      uncapped_log_lines_counted: full.res.log.total_lines,
      uncapped_log_json_bytes: JSON.stringify(full.res.log).length,
      cap_mb: Math.round(cap / MiB),
      capped_stop_ms: capped.ms,
      capped_error: capped.res.error ?? '(none)',
      capped_rss_growth_mb: capped.rssMb,
      newline_free_output_mb: Math.round(flatBytes / MiB),
      newline_free_uncapped_build_ms: flatFull.ms,
      newline_free_uncapped_success: String(flatFull.res.success),
      newline_free_uncapped_event_loop_busy_ms: flatFull.loopBusyMs,
      newline_free_uncapped_longest_stall_ms: flatFull.longestStallMs,
      newline_free_uncapped_reading_ms: flatFull.writesMs,
      newline_free_uncapped_max_single_write_ms: flatFull.maxWriteMs,
      newline_free_uncapped_peak_rss_mb: flatFull.peakRssMb,
      newline_free_uncapped_rss_growth_mb: flatFull.rssMb,
      newline_free_uncapped_log_json_bytes: JSON.stringify(flatFull.res.log).length,
      newline_free_cap_mb: Math.round(flatCap / MiB),
      newline_free_capped_stop_ms: flatCapped.ms,
      newline_free_capped_error: flatCapped.res.error ?? '(none)',
      newline_free_capped_event_loop_busy_ms: flatCapped.loopBusyMs,
      newline_free_capped_longest_stall_ms: flatCapped.longestStallMs,
      newline_free_capped_reading_ms: flatCapped.writesMs,
      newline_free_capped_max_single_write_ms: flatCapped.maxWriteMs,
      newline_free_capped_peak_rss_mb: flatCapped.peakRssMb,
    };
  } finally {
    rmSync(worktree, { recursive: true, force: true });
    await Promise.all(builders.map((b) => b.release(runId)));
    await new DockerEnvironmentBuilder(docker, { ...cfg, imageMaxAgeMs: 1 }).gc({
      runId,
      now: Date.now() + 1000,
    });
  }
}
