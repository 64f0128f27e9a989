import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { loadConfig } from '../config/config.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { dockerAvailable } from '../environment/docker.js';
import { LocalSandbox } from '../environment/local.js';
import type { Sandbox } from '../environment/types.js';
import type { BenchOptions } from './options.js';

/** Same place from src/bench and dist/bench. */
const FIXTURE = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../test/fixtures/pyproject-ok',
);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function timeRuns(sandbox: Sandbox, worktree: string, runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = Date.now();
    const out = await sandbox.run({ argv: ['true'], worktree, timeoutMs: 30_000, maxOutputBytes: 4096 });
    if (out.status !== 'passed')
      throw new Error(`trivial run failed in ${sandbox.kind}: ${JSON.stringify(out)}`);
    times.push(Date.now() - t);
  }
  return median(times);
}

/**
 * Cold build vs cache hit for the fixture environment, the judge's no-cache rebuild, and the overhead
 * of a container run (create → start → wait → remove) against the same argv run locally. The engine is
 * shared: a label unique to this benchmark, first in the Dockerfile, makes its images its own (and the
 * first build cold without touching anyone's cache), and only images of its run id are removed.
 */
export async function benchDocker({ smoke }: BenchOptions): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { skipped: 'no Docker engine reachable' };
  const cfg = loadConfig().sandbox;
  const builder = new DockerEnvironmentBuilder(docker, cfg);
  const runId = `bench-${Date.now()}`;
  const worktree = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-'));
  cpSync(FIXTURE, worktree, { recursive: true });
  const dockerfile = [
    `FROM ${cfg.baseImage}`,
    `LABEL agenticfix.bench=${runId}`,
    'COPY pyproject.toml /opt/calc/',
    'RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest',
    '',
  ].join('\n');
  try {
    const cold = await builder.build({ dockerfile, worktree, runId });
    if (!cold.success || !cold.image_id) throw new Error(`bench build failed: ${cold.error}`);
    const hit = await builder.build({ dockerfile, worktree, runId });
    if (!hit.cache_hit) throw new Error('second identical build was not a cache hit');
    const rebuilt = await builder.build({ dockerfile, worktree, runId, noCache: true });
    if (!rebuilt.success) throw new Error(`bench no-cache rebuild failed: ${rebuilt.error}`);
    const runs = smoke ? 1 : 5;
    const dockerMs = await timeRuns(builder.sandboxFor(cold.image_id, runId), worktree, runs);
    const localMs = await timeRuns(new LocalSandbox(), worktree, runs);
    return {
      cold_build_ms: cold.duration_ms,
      cache_hit_build_ms: hit.duration_ms,
      no_cache_rebuild_ms: rebuilt.duration_ms,
      docker_trivial_run_ms_median: dockerMs,
      local_trivial_run_ms_median: localMs,
      docker_over_local_ratio: Math.round((dockerMs / Math.max(localMs, 1)) * 10) / 10,
    };
  } finally {
    rmSync(worktree, { recursive: true, force: true });
    await builder.release(runId);
    await new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 0, imageMaxAgeMs: 0 }).gc({ runId });
  }
}
