import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { prepareHost } from '../pipeline/startup.js';
import { compose } from './compose.js';
import { splitArgv } from '../verify/argv.js';
import { judge } from '../verify/judge.js';
import { renderMarkdown } from '../verify/markdown.js';
import { gradeInstance, loadTasks } from '../verify/task.js';
import type { VerificationReport } from '../verify/types.js';
import { command, parseCli, readUserFile, resolveRepo, usageLine } from './program.js';

const collect = (value: string, previous: string[]) => [...previous, value];

const cli = () =>
  command('verify', 'judge a candidate patch in a clean worktree and a fresh container')
    .usage(
      '--repo <path|URL> --base <rev> --patch <file> --dockerfile <file> --test "<argv>" [--test-glob <glob>]... [--json]\n' +
        '       agenticfix verify --task <tasks.jsonl> --instance <id> --patch <file> [--dockerfile <file>] [--json]',
    )
    .addHelpText(
      'after',
      `
Judges a candidate patch in fresh worktrees, in containers of the Dockerfile's image: an image
already built from the same content (Dockerfile, context, base image) is reused, as the report's
image.reused says; anything else is built.
Prints the evidence report as Markdown (or JSON with --json). Exit code 0 when verified
(task mode: resolved), 1 for any other verdict, 2 for a usage error.
`,
    )
    .option('--repo <path|URL>', 'the repository (a path is taken from the working directory)')
    .option('--base <rev>', 'the revision the patch applies to')
    .option('--patch <file>', 'the candidate patch')
    .option('--dockerfile <file>', "the environment's Dockerfile")
    .option('--test <argv>', 'the test command')
    .option('--test-glob <glob>', 'test files the patch may not touch (repeatable)', collect, [])
    .option('--task <tasks.jsonl>', 'task mode: the task file')
    .option('--instance <id>', 'task mode: the instance')
    .option('--json', 'print the report as JSON', false);

const Flags = z.strictObject({
  repo: z.string().min(1).optional(),
  base: z.string().min(1).optional(),
  patch: z.string().min(1),
  dockerfile: z.string().min(1).optional(),
  test: z.string().min(1).optional(),
  testGlob: z.array(z.string().min(1)),
  task: z.string().min(1).optional(),
  instance: z.string().min(1).optional(),
  json: z.boolean(),
});

const usage = (problem: string) => {
  process.stderr.write(usageLine('verify', problem));
  return 2;
};

export async function verifyCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const values = parsed.opts;
  const patch = readUserFile('--patch', values.patch);
  const dockerfile = values.dockerfile ? readUserFile('--dockerfile', values.dockerfile) : undefined;
  const config = loadConfig();
  const parts = compose(config);
  await prepareHost({ config, workspaces: parts.workspaces, docker: true, checkMounts: true });
  let report: VerificationReport;

  if (values.task || values.instance) {
    if (!values.task || !values.instance) return usage('--task and --instance go together');
    const task = (
      await loadTasks(values.task, (m) => process.stderr.write(`agenticfix verify: warning: ${m}\n`))
    ).find((t) => t.instance_id === values.instance);
    if (!task) return usage(`no instance ${values.instance} in ${values.task}`);
    const overridden = {
      ...task,
      repo: values.repo ? resolveRepo(values.repo) : task.repo,
      base_commit: values.base ?? task.base_commit,
      test_command: values.test ?? task.test_command,
    };
    report = await gradeInstance(overridden, patch, config, { ...parts, dockerfile });
  } else {
    const missing = (['repo', 'base', 'dockerfile', 'test'] as const).filter((k) => !values[k]);
    if (missing.length > 0) return usage(`missing ${missing.map((k) => `--${k}`).join(', ')}`);
    let testArgv: string[];
    try {
      testArgv = splitArgv(values.test!);
    } catch (err) {
      return usage((err as Error).message);
    }
    report = await judge({
      ...parts,
      config,
      remote: resolveRepo(values.repo!),
      baseCommit: values.base!,
      patch,
      dockerfile: dockerfile!,
      testArgv,
      testGlobs: values.testGlob.length > 0 ? values.testGlob : undefined,
    });
  }
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : renderMarkdown(report));
  return report.verdict === 'verified' ? 0 : 1;
}
