import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { loadConfig } from '../config/config.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { containersStarted } from '../environment/containers.js';
import { dockerAvailable } from '../environment/docker.js';
import { LocalSandbox } from '../environment/local.js';
import type { Sandbox } from '../environment/types.js';
import { runCommand } from '../tools/run-command.js';
import type { ToolContext } from '../tools/types.js';
import { RunTrace } from '../trace/trace.js';
import { removeStage } from '../workspace/stage.js';
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
 * run_command as the model calls it (argv `true`), through the run's sandbox: the first call starts the
 * warm container, the others are `docker exec`s in it. Returns the first call's time and the others' median.
 */
async function timeRunCommand(ctx: ToolContext, runs: number): Promise<{ first: number; median: number }> {
  const times: number[] = [];
  for (let i = 0; i <= runs; i++) {
    const t = Date.now();
    const res = await runCommand.run(ctx, { argv: ['true'] });
    if (!res.success) throw new Error(`run_command failed through the warm sandbox: ${JSON.stringify(res)}`);
    times.push(Date.now() - t);
  }
  return { first: times[0]!, median: median(times.slice(1)) };
}

/**
 * Cold build vs cache hit for the fixture environment, the judge's no-cache rebuild, and the overhead
 * of a container run (create → start → wait → remove) against the same argv run locally. The engine is
 * shared: a label unique to this benchmark, first in the Dockerfile, makes its images its own (and the
 * first build cold without touching anyone's cache), and only images of its run id are removed. Then
 * run_command through the warm sandbox (one container per run, each call an exec), and how many containers
 * a run with one environment rebuild started (1 + rebuilds).
 */
export async function benchDocker({ smoke }: BenchOptions): Promise<Record<string, number | string>> {
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { skipped: 'no Docker engine reachable' };
  const config = loadConfig();
  const cfg = config.sandbox;
  const builder = new DockerEnvironmentBuilder(docker, cfg);
  const runId = `bench-${Date.now()}`;
  const worktree = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-'));
  cpSync(FIXTURE, worktree, { recursive: true });
  const dockerfile = [
    `FROM ${cfg.baseImage}`,
    `LABEL agenticfix.bench=${runId}`,
    'COPY pyproject.toml /opt/calc/',
    // `--smoke`: a step that builds in a second takes the same code path as the install (two ~30 s builds).
    smoke
      ? 'RUN touch /opt/calc/built'
      : 'RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest',
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

    const since = Date.now();
    const ctx: ToolContext = {
      runId,
      worktree,
      gitDir: '',
      baseCommit: '',
      limits: config.limits,
      testCommands: { default: ['true'] },
      runDir: path.join(worktree, '..', `${path.basename(worktree)}-run`),
      sandbox: builder.runSandboxFor(cold.image_id, runId),
      environment: null,
      builder,
      trace: new RunTrace(runId, path.join(worktree, '..', `${path.basename(worktree)}-runs`)),
    };
    const warm = await timeRunCommand(ctx, smoke ? 2 : 20);
    ctx.sandbox = builder.runSandboxFor(rebuilt.image_id ?? cold.image_id, runId); // the environment built again
    await timeRunCommand(ctx, 1);
    const containers = await containersStarted(docker, runId, since);
    return {
      cold_build_ms: cold.duration_ms,
      cache_hit_build_ms: hit.duration_ms,
      no_cache_rebuild_ms: rebuilt.duration_ms,
      docker_trivial_run_ms_median: dockerMs,
      local_trivial_run_ms_median: localMs,
      docker_over_local_ratio: Math.round((dockerMs / Math.max(localMs, 1)) * 10) / 10,
      warm_first_call_ms: warm.first,
      warm_call_ms_median: warm.median,
      warm_over_local_ratio: Math.round((warm.median / Math.max(localMs, 1)) * 10) / 10,
      warm_environment_rebuilds: 1,
      warm_containers_per_run: containers,
    };
  } finally {
    await builder.release(runId); // removes the warm container before its worktree goes
    for (const dir of [worktree, `${worktree}-run`, `${worktree}-runs`])
      rmSync(dir, { recursive: true, force: true });
    await removeStage(worktree); // the mark beside the worktree: it was lent to containers
    await new DockerEnvironmentBuilder(docker, { ...cfg, imageKeep: 0, imageMaxAgeMs: 0 }).gc({ runId });
  }
}
