import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { runRepair } from '../pipeline/repair.js';
import { prepareHost } from '../pipeline/startup.js';
import type { IssueText, RepairResult } from '../agent/types.js';
import type { ModelSpec, RepairProgress } from '../pipeline/types.js';
import { stopwatch } from '../trace/phases.js';
import { splitArgv } from '../verify/argv.js';

const USAGE = `usage: agenticfix run --repo <path or URL> --base <rev> --issue <markdown file> --test "<argv>"
                      [--model scripted:<file> | human] [--sandbox docker|local] [--dockerfile <file>]
                      [--keep-worktree] [--json]

Without --model the model comes from AGENTICFIX_MODEL_PROVIDER / _NAME / _API_KEY / _BASE_URL.
--sandbox local runs the tests on this machine without isolation: trusted repositories only.
`;

const Flags = z.strictObject({
  repo: z.string().min(1, '--repo is required'),
  base: z.string().min(1).default('HEAD'),
  issue: z.string().min(1, '--issue is required'),
  test: z.string().min(1, '--test is required'),
  model: z
    .string()
    .regex(/^(scripted:.+|human)$/, '--model must be scripted:<file> or human')
    .optional(),
  sandbox: z.enum(['docker', 'local']).default('docker'),
  dockerfile: z.string().min(1).optional(),
  'keep-worktree': z.boolean().default(false),
  json: z.boolean().default(false),
  help: z.boolean().default(false),
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
  if (flag?.startsWith('scripted:')) return { kind: 'scripted', scriptPath: flag.slice('scripted:'.length) };
  return { kind: 'openai' };
}

export function formatResult(r: RepairResult): string {
  return [
    `run ${r.run_id}: ${r.stop_reason}${r.error ? ` (${r.error})` : ''}`,
    r.summary ? `summary: ${r.summary}` : null,
    `model: ${r.model_name ?? '-'}; requests ${r.requests}, tool calls ${r.tool_calls}, tokens ${r.tokens.total} (prompt ${r.tokens.prompt}, completion ${r.tokens.completion}, cached ${r.tokens.cached})`,
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
  let flags: z.infer<typeof Flags>;
  let testArgv: string[];
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        repo: { type: 'string' },
        base: { type: 'string' },
        issue: { type: 'string' },
        test: { type: 'string' },
        model: { type: 'string' },
        sandbox: { type: 'string' },
        dockerfile: { type: 'string' },
        'keep-worktree': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    const parsed = Flags.safeParse(values);
    if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join('\n'));
    flags = parsed.data;
    testArgv = splitArgv(flags.test);
    if (testArgv.length === 0) throw new Error('--test must name a command');
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }

  // With --json, stdout carries only the result; everything else goes to stderr.
  const log = flags.json ? process.stderr : process.stdout;
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const started = stopwatch();
  try {
    const config = loadConfig();
    await prepareHost({ config, docker: flags.sandbox === 'docker', checkMounts: true });
    const result = await runRepair({
      config,
      remote: flags.repo,
      baseCommit: flags.base,
      issue: parseIssueMarkdown(readFileSync(flags.issue, 'utf8')),
      testArgv,
      model: modelSpec(flags.model, log),
      sandbox: flags.sandbox,
      dockerfile: flags.dockerfile ? readFileSync(flags.dockerfile, 'utf8') : undefined,
      keepWorktree: flags['keep-worktree'],
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
  }
}
