import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/config.js';
import { prepareHost } from '../pipeline/startup.js';
import { splitArgv } from '../verify/argv.js';
import { judge } from '../verify/judge.js';
import { renderMarkdown } from '../verify/markdown.js';
import { gradeInstance, loadTasks } from '../verify/task.js';
import type { VerificationReport } from '../verify/types.js';

const USAGE = `usage: agenticfix verify --repo <path|URL> --base <rev> --patch <file> --dockerfile <file> --test "<argv>"
                         [--test-glob <glob>]... [--json]
       agenticfix verify --task <tasks.jsonl> --instance <id> --patch <file> [--dockerfile <file>] [--json]

Judges a candidate patch in fresh worktrees, in containers of the Dockerfile's image: an image
already built from the same content (Dockerfile, context, base image) is reused, as the report's
image.reused says; anything else is built.
Prints the evidence report as Markdown (or JSON with --json). Exit code 0 when verified
(task mode: resolved), 1 for any other verdict, 2 for a usage error.
`;

const OPTIONS = {
  repo: { type: 'string' },
  base: { type: 'string' },
  patch: { type: 'string' },
  dockerfile: { type: 'string' },
  test: { type: 'string' },
  'test-glob': { type: 'string', multiple: true },
  task: { type: 'string' },
  instance: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

const usage = (problem: string) => {
  process.stderr.write(`agenticfix verify: ${problem}\n${USAGE}`);
  return 2;
};

export async function verifyCommand(argv: string[]): Promise<number> {
  let values;
  try {
    values = parseArgs({ args: argv, options: OPTIONS, allowPositionals: false, strict: true }).values;
  } catch (err) {
    return usage((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (!values.patch) return usage('--patch is required');
  const config = loadConfig();
  await prepareHost({ config, docker: true, checkMounts: true });
  const patch = await readFile(values.patch, 'utf8');
  const dockerfile = values.dockerfile ? await readFile(values.dockerfile, 'utf8') : undefined;
  let report: VerificationReport;

  if (values.task || values.instance) {
    if (!values.task || !values.instance) return usage('--task and --instance go together');
    const task = (
      await loadTasks(values.task, (m) => process.stderr.write(`agenticfix verify: warning: ${m}\n`))
    ).find((t) => t.instance_id === values.instance);
    if (!task) return usage(`no instance ${values.instance} in ${values.task}`);
    const overridden = {
      ...task,
      repo: values.repo ?? task.repo,
      base_commit: values.base ?? task.base_commit,
      test_command: values.test ?? task.test_command,
    };
    report = await gradeInstance(overridden, patch, config, { dockerfile });
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
      config,
      remote: values.repo!,
      baseCommit: values.base!,
      patch,
      dockerfile: dockerfile!,
      testArgv,
      testGlobs: values['test-glob'],
    });
  }
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : renderMarkdown(report));
  return report.verdict === 'verified' ? 0 : 1;
}
