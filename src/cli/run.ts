import { Option } from 'commander';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { usd } from '../config/prices.js';
import { runRepair } from '../pipeline/repair.js';
import { prepareHost } from '../pipeline/startup.js';
import { compose } from './compose.js';
import type { IssueText, RepairResult } from '../agent/types.js';
import type { ModelSpec, RepairProgress } from '../pipeline/types.js';
import { stopwatch } from '../trace/phases.js';
import { splitArgv } from '../verify/argv.js';
import { command, parseCli, readUserFile, resolveRepo, usageLine } from './program.js';
import { modelFromFlag } from './model-flag.js';

const cli = () =>
  command('run', 'repair one issue in a fresh worktree')
    .usage('--repo <path|URL> --issue <file> --test "<argv>" [options]')
    .option('--repo <path|URL>', 'the repository (a path is taken from the working directory)')
    .option('--base <rev>', 'the revision to start from', 'HEAD')
    .option('--issue <file>', 'the issue as Markdown: first line the title, the rest the body')
    .option('--test <argv>', 'the test command, e.g. "npm test"')
    .option('--model <model>', 'scripted:<file> or human (default: AGENTICFIX_MODEL_*)')
    .addOption(
      new Option('--sandbox <kind>', 'local runs tests on this machine: trusted repositories only')
        .choices(['docker', 'local'])
        .default('docker'),
    )
    .option('--dockerfile <file>', 'the environment to use instead of one the model writes')
    .option('--keep-worktree', 'keep the worktree after the run', false)
    .option('--json', 'print the result as JSON (all else goes to stderr)', false);

const Flags = z.strictObject({
  repo: z.string().min(1),
  base: z.string().min(1),
  issue: z.string().min(1),
  test: z.string().min(1),
  model: z
    .string()
    .regex(/^(scripted:.+|human)$/, 'must be scripted:<file> or human')
    .optional(),
  sandbox: z.enum(['docker', 'local']),
  dockerfile: z.string().min(1).optional(),
  keepWorktree: z.boolean(),
  json: z.boolean(),
});

/** The first heading (or first line) is the title; the rest is the body. */
export function parseIssueMarkdown(text: string): IssueText {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  const at = lines.findIndex((l) => l.trim() !== '');
  if (at < 0) return { title: '(untitled)', body: '' };
  return {
    title: lines[at]!.replace(/^#+\s*/, '').trim(),
    body: lines
      .slice(at + 1)
      .join('\n')
      .trim(),
  };
}

function modelSpec(flag: string | undefined, humanOutput: NodeJS.WritableStream): ModelSpec {
  if (flag === 'human') return { kind: 'human', input: process.stdin, output: humanOutput };
  return { kind: 'openai' };
}

export function formatResult(r: RepairResult): string {
  return [
    `run ${r.run_id}: ${r.stop_reason}${r.error ? ` (${r.error})` : ''}`,
    r.summary ? `summary: ${r.summary}` : null,
    `model: ${r.model_name ?? '-'}; requests ${r.requests}, tool calls ${r.tool_calls}, tokens ${r.tokens.total} (prompt ${r.tokens.prompt}, completion ${r.tokens.completion}, cached ${r.tokens.cached}), cost ${usd(r.cost_usd)}`,
    `last test run: ${r.last_test?.status ?? 'none'}`,
    `patch: ${r.patch ? r.patch_path : 'none'}`,
    `trace: ${r.trace_path}`,
    r.worktree_path ? `worktree kept at ${r.worktree_path}` : null,
  ]
    .filter(Boolean)
    .join('\n');
}

/**
 * A progress line for stderr: each phase but the model's steps, and each build step with the time
 * since the build and since the run started. Null when there is nothing new to say.
 */
export function progressLine(p: RepairProgress, runMs: number): string | null {
  const at = `${Math.round(runMs / 1000)} s`;
  if (p.build) return `[build ${Math.round(p.build.elapsed_ms / 1000)} s, run ${at}] ${p.build.step}`;
  return p.phase === 'working' ? null : `[${p.phase}, ${at}]`;
}

/** `agenticfix run`: one repair; prints the result (text, or the RepairResult as JSON). Exit 0 when completed. */
export async function runCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const flags = parsed.opts;
  let testArgv: string[];
  try {
    testArgv = splitArgv(flags.test);
    if (testArgv.length === 0) throw new Error('must name a command');
  } catch (err) {
    process.stderr.write(usageLine('run', `--test: ${(err as Error).message}`));
    return 2;
  }
  const issue = parseIssueMarkdown(readUserFile('--issue', flags.issue));
  const dockerfile = flags.dockerfile ? readUserFile('--dockerfile', flags.dockerfile) : undefined;

  // With --json, stdout carries only the result; everything else goes to stderr.
  const log = flags.json ? process.stderr : process.stdout;
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const started = stopwatch();
  const model = await modelFromFlag(flags.model, () => modelSpec(flags.model, log));
  try {
    const config = loadConfig();
    const parts = compose(config);
    await prepareHost({
      config,
      workspaces: parts.workspaces,
      docker: flags.sandbox === 'docker',
      checkMounts: true,
    });
    const result = await runRepair({
      ...parts,
      config,
      remote: resolveRepo(flags.repo),
      baseCommit: flags.base,
      issue,
      testArgv,
      model: model.spec,
      sandbox: flags.sandbox,
      dockerfile,
      keepWorktree: flags.keepWorktree,
      signal: controller.signal,
      onProgress: (p) => {
        const line = progressLine(p, started());
        if (line) process.stderr.write(`${line}\n`);
      },
    });
    process.stdout.write(flags.json ? `${JSON.stringify(result, null, 2)}\n` : `${formatResult(result)}\n`);
    // A run that could not work says why where a person looks, also with --json.
    if (result.stop_reason === 'fatal')
      process.stderr.write(`run failed: ${result.error ?? 'no reason recorded'}\n`);
    return result.stop_reason === 'completed' ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await model.close();
  }
}
