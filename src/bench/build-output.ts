import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../config/config.js';
import { DockerEnvironmentBuilder } from '../environment/builder.js';
import { dockerAvailable } from '../environment/docker.js';
import type { BenchOptions } from './options.js';

const MiB = 1024 * 1024;
/** The build that once ended the process with `RangeError: Invalid string length`. */
const OUTPUT_BYTES = 700_000_000;
const SMOKE_OUTPUT_BYTES = 20_000_000;

/**
 * A build whose RUN step prints 700 MB: with the output cap raised it completes (time, memory and
 * log size are what matter); with the configured cap it is stopped (time to stop).
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
  const dockerfile = (n: number) =>
    `FROM ${cfg.baseImage}\nRUN echo ${runId}-${n} && yes ${'a'.repeat(99)} | head -c ${bytes}\n`;
  const measure = async (n: number, maxOutput: number) => {
    const builder = new DockerEnvironmentBuilder(docker, { ...cfg, buildMaxOutputBytes: maxOutput });
    const before = process.memoryUsage().rss;
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    const started = Date.now();
    const res = await builder.build({ dockerfile: dockerfile(n), worktree, runId, noCache: true });
    clearInterval(timer);
    return { res, ms: Date.now() - started, rssMb: Math.round((peak - before) / MiB) };
  };
  try {
    const full = await measure(1, 2 * bytes);
    const capped = await measure(2, cap);
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
    };
  } finally {
    rmSync(worktree, { recursive: true, force: true });
    await new DockerEnvironmentBuilder(docker, { ...cfg, imageMaxAgeMs: 1 }).gc({
      runId,
      now: Date.now() + 1000,
    });
  }
}
