import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { loadConfig, type Config } from '../config/config.js';
import { runRepair } from '../pipeline/repair.js';
import { prepareHost } from '../pipeline/startup.js';
import { compose } from './compose.js';
import type { ModelSpec } from '../pipeline/types.js';
import { newRunId } from '../trace/ids.js';
import { gradeInstance, loadTasks, summarize, taskArgv, type RunSummary } from '../verify/task.js';
import type { VerificationReport } from '../verify/types.js';
import { stopwatch } from '../trace/phases.js';
import { command, parseCli, usageLine, userFile } from './program.js';
import { modelFromFlag } from './model-flag.js';

const cli = () =>
  command('eval', 'run the agent and the judge on a JSON Lines task file')
    .argument('[tasks.jsonl]', 'the task file (required)')
    .option('--model <name>', 'a model name, or scripted:<file> (default: AGENTICFIX_MODEL_*)')
    .option('--runs <K>', 'runs per task', '1')
    .option('--instance <id>', 'only this instance (repeatable)', (v: string, p: string[]) => [...p, v], [])
    .option('--out <dir>', 'where the reports go (default: <runs dir>/eval-<id>)')
    .option('--json', 'print the summary as JSON', false)
    .addHelpText(
      'after',
      `
Runs the agent then the independent judge on every task, K times each, and reports resolved
per run, the mean, pass@K, tokens and time per task. Per-instance report.json files and
summary.json go under --out.
`,
    );

const Flags = z.strictObject({
  model: z.string().min(1).optional(),
  runs: z.coerce.number().int().min(1, 'must be 1 or more'),
  instance: z.array(z.string().min(1)),
  out: z.string().min(1).optional(),
  json: z.boolean(),
});

/** One agent run graded by the judge. */
export interface EvalRecord {
  instance_id: string;
  run: number;
  resolved: boolean;
  verdict: VerificationReport['verdict'];
  tokens: number;
  duration_ms: number;
}

export interface EvalSummary {
  tasks: number;
  runs: number;
  resolved_per_run: number[];
  mean_resolved: number;
  /** Share of tasks resolved in at least one of the K runs. */
  pass_at_k: number;
  per_task: { instance_id: string; resolved_runs: number; mean_tokens: number; mean_duration_ms: number }[];
  /** SWE-bench-style summary of each run. */
  run_summaries: RunSummary[];
}

const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/** Aggregates graded runs: resolved per run, their mean, pass@K and per-task cost. */
export function aggregateEval(
  records: readonly EvalRecord[],
  reportsByRun: readonly VerificationReport[][],
  runs: number,
): EvalSummary {
  const ids = [...new Set(records.map((r) => r.instance_id))];
  const resolvedPerRun = Array.from(
    { length: runs },
    (_, k) => records.filter((r) => r.run === k + 1 && r.resolved).length,
  );
  const perTask = ids.map((id) => {
    const mine = records.filter((r) => r.instance_id === id);
    return {
      instance_id: id,
      resolved_runs: mine.filter((r) => r.resolved).length,
      mean_tokens: mean(mine.map((r) => r.tokens)),
      mean_duration_ms: mean(mine.map((r) => r.duration_ms)),
    };
  });
  return {
    tasks: ids.length,
    runs,
    resolved_per_run: resolvedPerRun,
    mean_resolved: mean(resolvedPerRun),
    pass_at_k: ids.length === 0 ? 0 : perTask.filter((t) => t.resolved_runs > 0).length / ids.length,
    per_task: perTask,
    run_summaries: reportsByRun.map((reports) => summarize(reports)),
  };
}

function modelSpec(flag: string | undefined, config: Config): ModelSpec {
  if (flag) config.model.name = flag;
  return { kind: 'openai' };
}

export async function evalCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const values = parsed.opts;
  const runs = values.runs;
  if (parsed.args.length === 0) {
    process.stderr.write(usageLine('eval', 'the task file is required'));
    return 2;
  }
  const taskFile = userFile('the task file', parsed.args[0]!);
  const config = loadConfig();
  const parts = compose(config);
  await prepareHost({ config, workspaces: parts.workspaces, docker: true, checkMounts: true });
  const only = values.instance.length > 0 ? values.instance : null;
  const tasks = (
    await loadTasks(taskFile, (m) => process.stderr.write(`agenticfix eval: warning: ${m}\n`))
  ).filter((t) => !only || only.includes(t.instance_id));
  const outDir = path.resolve(values.out ?? path.join(config.runsDir, newRunId('eval')));
  const records: EvalRecord[] = [];
  const reportsByRun: VerificationReport[][] = [];
  for (let k = 1; k <= runs; k++) {
    const reports: VerificationReport[] = [];
    for (const task of tasks) {
      const elapsed = stopwatch();
      // A scripted model replays from its first step for each repair.
      const model = await modelFromFlag(values.model, () => modelSpec(values.model, config));
      const repair = await runRepair({
        ...parts,
        config,
        remote: task.repo,
        baseCommit: task.base_commit,
        issue: { title: task.instance_id, body: task.problem_statement },
        testArgv: taskArgv(task),
        model: model.spec,
        sandbox: 'docker',
        dockerfile: task.dockerfile,
      }).finally(() => model.close());
      const report = await gradeInstance(task, repair.patch, config, {
        ...parts,
        dockerfile: task.dockerfile ?? repair.dockerfile ?? undefined,
        outDir: path.join(outDir, `run-${k}`, task.instance_id),
      });
      reports.push(report);
      records.push({
        instance_id: task.instance_id,
        run: k,
        resolved: report.task?.resolved === true,
        verdict: report.verdict,
        tokens: repair.tokens.total,
        duration_ms: elapsed(),
      });
      if (!values.json)
        process.stderr.write(
          `run ${k} ${task.instance_id}: ${report.verdict} (${repair.stop_reason}, ${repair.tokens.total} tokens)\n`,
        );
    }
    reportsByRun.push(reports);
  }
  const summary = aggregateEval(records, reportsByRun, runs);
  await mkdir(outDir, { recursive: true });
  await writeFile(path.join(outDir, 'summary.json'), `${JSON.stringify({ summary, records }, null, 2)}\n`);
  if (values.json) process.stdout.write(`${JSON.stringify({ summary, records }, null, 2)}\n`);
  else {
    const lines = [
      `tasks: ${summary.tasks}, runs: ${runs}`,
      `resolved per run: ${summary.resolved_per_run.join(', ')} (mean ${summary.mean_resolved.toFixed(2)})`,
      `pass@${runs}: ${(summary.pass_at_k * 100).toFixed(1)}%`,
      ...summary.per_task.map(
        (t) =>
          `  ${t.instance_id}: resolved ${t.resolved_runs}/${runs}, ${Math.round(t.mean_tokens)} tokens, ${(t.mean_duration_ms / 1000).toFixed(1)} s`,
      ),
      `reports: ${outDir}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  return 0;
}
