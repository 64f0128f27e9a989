import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../config/config.js';
import { runAppDemo } from '../demo/app.js';
import { DockerEnvironmentBuilder } from '../images/builder.js';
import { dockerAvailable } from '../environment/docker.js';
import { githubSpacingWaitMs } from '../publish/github.js';
import { pacingRefillMs } from '../publish/pacing.js';
import { VerificationReportSchema } from '../verify/types.js';
import type { BenchOptions } from './options.js';
import { wallBreakdown } from './breakdown.js';
import { round, share } from './stats.js';
import { compose } from '../cli/compose.js';

/**
 * Label-to-draft-PR wall time of the demo (from the label to the end of its run, comments posted; not the
 * emulator's and app's start), cold (a fresh repository, no environment image) and warm (a second issue
 * on the same repository, as a user's second run: its mirror fetched and its images built), and the
 * share outside test runs. The engine is shared: the demo starts FROM a base image of the benchmark's own (the base
 * image plus a label unique to this benchmark), so the cold build misses every cache without removing
 * anyone's images, and only the images of the benchmark's runs are removed afterwards.
 */
export async function demoWallTime(
  o: BenchOptions = { smoke: false },
): Promise<Record<string, number | string>> {
  const { smoke } = o;
  const docker = new Docker();
  if (!(await dockerAvailable(docker))) return { demo_skipped: 'no Docker engine' };
  const home = mkdtempSync(path.join(tmpdir(), 'bench-demo-'));
  const benchId = `bench-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const base = `agenticfix-bench:${benchId}`;
  const seed = await docker.createContainer({
    Image: loadConfig({}, home).sandbox.baseImage,
    Entrypoint: ['/bench-base-is-never-started'],
  });
  await seed.commit({
    repo: 'agenticfix-bench',
    tag: benchId,
    changes: `LABEL agenticfix.bench=${benchId}`,
  });
  await seed.remove({ force: true });
  const config = loadConfig(
    { AGENTICFIX_HOME: home, AGENTICFIX_RUNS_DIR: path.join(home, 'runs'), AGENTICFIX_BASE_IMAGE: base },
    home,
  );
  const runs: string[] = [];
  const out: Record<string, number | string> = {};
  try {
    const spacing: number[] = [];
    const s = await runAppDemo({
      config,
      ...compose(config),
      model: 'scripted',
      // A second issue comes later than GitHub's write pacing takes to refill (the smoke run does not wait):
      // back to back, the second run's writes would be spaced for the first run's.
      again: { afterMs: smoke ? 0 : pacingRefillMs(config.app.githubWriteIntervalMs) },
      onLabel: () => spacing.push(githubSpacingWaitMs()),
      log: () => {},
    });
    const spaced = [...spacing, githubSpacingWaitMs()];
    for (const id of [s.run_id, s.again?.run_id]) if (id) runs.push(id);
    if (s.result !== 'success' || s.label_to_pr_ms === null || !s.again)
      throw new Error(`demo failed: ${s.error}`);
    const timed = [
      { phase: 'cold', trace: s.trace_path!, runId: s.run_id!, at: s.labelled_at!, wall: s.label_to_pr_ms },
      {
        phase: 'warm',
        trace: s.again.trace_path!,
        runId: s.again.run_id,
        at: s.again.labelled_at,
        wall: s.again.label_to_pr_ms,
      },
    ] as const;
    for (const [i, { phase, trace, runId, at, wall }] of timed.entries()) {
      const reportPath = path.join(config.runsDir, `${runId}-verify`, 'report.json');
      const run = runFigures(trace, reportPath);
      out[`demo_${phase}_label_to_pr_s`] = round(wall / 1000);
      out[`demo_${phase}_test_runs_s`] = round(run.testMs / 1000);
      out[`demo_${phase}_share_outside_tests`] = share(wall - run.testMs, wall);
      out[`demo_${phase}_judge_share`] = share(run.judgeMs, wall);
      // Writes held back for GitHub's pacing (the demo's emulator is paced like GitHub), summed per
      // write: some of them (status edits) run beside the job rather than holding it up.
      out[`demo_${phase}_github_spacing_share`] = share(spaced[i + 1]! - spaced[i]!, wall);
      out[`demo_${phase}_image_builds`] = run.builds;
      if (phase === 'warm') {
        // Where the warm run's time outside tests goes, as shares of its wall time (breakdown.ts).
        const parts = wallBreakdown({
          labelledAt: Date.parse(at),
          wallMs: wall,
          eventsPath: trace,
          resultPath: path.join(path.dirname(trace), 'result.json'),
          reportPath,
        });
        for (const [part, ms] of Object.entries(parts))
          // Three places: most parts are a few hundredths.
          if (part !== 'tests')
            out[`demo_warm_outside_${part}_share`] = Math.round((ms / wall) * 1000) / 1000;
      }
    }
  } finally {
    const sweep = new DockerEnvironmentBuilder(docker, { ...config.sandbox, imageKeep: 0, imageMaxAgeMs: 0 });
    for (const run of runs) for (const id of [run, `${run}-verify`]) await sweep.gc({ runId: id });
    await sweep.removeImage(base);
    rmSync(home, { recursive: true, force: true });
  }
  return out;
}

/**
 * Time spent in test runs (the agent's run_tests calls plus the wall time of the judge's cells, which
 * overlap), the judge's whole time, and the image builds (agent and judge) that ran and that were
 * served by an identical image.
 */
export function runFigures(eventsPath: string, reportPath: string) {
  const tools = readFileSync(eventsPath, 'utf8')
    .trim()
    .split('\n')
    .map(
      (l) =>
        JSON.parse(l) as {
          type: string;
          name?: string;
          duration_ms?: number;
          result?: { success?: boolean; data?: { cache_hit?: boolean } };
        },
    )
    .filter((e) => e.type === 'tool_end');
  const agentTests = tools
    .filter((e) => e.name === 'run_tests')
    .reduce((sum, e) => sum + (e.duration_ms ?? 0), 0);
  const hits = tools
    .filter((e) => e.name === 'build_environment' && e.result?.success)
    .map((e) => e.result?.data?.cache_hit === true);
  const report = VerificationReportSchema.parse(JSON.parse(readFileSync(reportPath, 'utf8')));
  return {
    testMs: agentTests + (report.phases?.cells_ms ?? 0),
    judgeMs: report.duration_ms,
    builds: [...hits, report.image?.reused].filter((hit) => hit === false).length,
    reused: [...hits, report.image?.reused].filter((hit) => hit === true).length,
  };
}
