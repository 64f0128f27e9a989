import Docker from 'dockerode';
import { Option } from 'commander';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { usd } from '../config/prices.js';
import { runAppDemo, type AppDemoSummary } from '../demo/app.js';
import { runToolsOnlyDemo } from '../demo/tools-only.js';
import { dockerAvailable } from '../environment/docker.js';
import { untilStopped } from './app-env.js';
import { compose } from './compose.js';
import { command, parseCli } from './program.js';

const cli = () =>
  command('demo', 'run the built-in calculator demo (no GitHub account, no API key)')
    .option('--json', 'print the summary as one JSON object', false)
    .option('--tools-only', 'the trusted tool-chain demo: no model, no app', false)
    .addOption(
      new Option('--sandbox <kind>', 'with --tools-only: where the tests run (default local)').choices([
        'local',
        'docker',
      ]),
    )
    .option('--keep-worktrees', 'with --tools-only: keep the worktrees', false)
    .addOption(
      new Option(
        '--model <model>',
        'scripted, or the one configured in AGENTICFIX_MODEL_* (default: configured if set)',
      ).choices(['scripted', 'configured']),
    )
    .option('--revise', 'then review the pull request and let the app revise it', false)
    .option(
      '--attempts <n>',
      'attempts of the run, each judged on its own; the smallest verified patch is published (scripted: one fails, two fix)',
      '1',
    )
    .option(
      '--models <names>',
      'with --attempts: the models the attempts take in turn, comma-separated (repository `models`; scripted: any names, each at the scripted price, else from AGENTICFIX_MODEL_ALLOWLIST)',
    )
    .option(
      '--serve',
      'then keep serving the run page (sign in as the emulated maintainer) until stopped',
      false,
    );

const Flags = z.strictObject({
  json: z.boolean(),
  keepWorktrees: z.boolean(),
  toolsOnly: z.boolean(),
  revise: z.boolean(),
  attempts: z.coerce.number().int().min(1),
  models: z
    .string()
    .transform((s) => s.split(',').map((m) => m.trim()))
    .pipe(z.array(z.string().min(1)).min(1))
    .optional(),
  serve: z.boolean(),
  sandbox: z.enum(['local', 'docker']).optional(),
  model: z.enum(['scripted', 'configured']).optional(),
});

const fmt = (c: { passed: number; failed: number } | null) =>
  c ? `${c.passed} passed, ${c.failed} failed` : 'n/a';

/**
 * `agenticfix demo`: the whole app flow on the calculator (GitHub emulator, scripted model unless a
 * real one is configured, Docker sandbox, judge, draft PR). `--tools-only` runs the trusted tool-chain
 * demo instead (no model, no app; `--sandbox local|docker`).
 */
export async function demoCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const flags = parsed.opts;
  const config = loadConfig();
  const out = (s: string) => process.stdout.write(s);
  const log = flags.json ? () => {} : (line: string) => out(`  ${line}\n`);

  if (flags.toolsOnly) {
    const summary = await runToolsOnlyDemo({
      ...compose(config),
      config,
      sandbox: flags.sandbox ?? 'local',
      keepWorktrees: flags.keepWorktrees,
      log,
    });
    if (flags.json) out(JSON.stringify(summary) + '\n');
    else
      out(
        [
          `base tests:    ${fmt(summary.base_tests)}`,
          `after edits:   ${fmt(summary.after_tests)}`,
          `clean verify:  ${fmt(summary.verify_tests)}`,
          `patch:         ${summary.patch_path ?? 'none'}`,
          `trace:         ${summary.trace_path}`,
          `result:        ${summary.result}${summary.error ? ` (${summary.error})` : ''}`,
          '',
        ].join('\n'),
      );
    return summary.result === 'success' ? 0 : 1;
  }

  if (flags.sandbox === 'local') {
    process.stderr.write(
      'agenticfix demo: the app flow runs repository code only in Docker; use --tools-only for the local sandbox\n',
    );
    return 2;
  }
  if (!(await dockerAvailable(new Docker()))) {
    process.stderr.write(
      'agenticfix demo: no Docker engine answers. Start one with `bash scripts/setup-docker.sh` (as root),\n' +
        'or run the trusted tool-chain demo without Docker: `npx agenticfix demo --tools-only`.\n',
    );
    return 2;
  }
  const model = flags.model ?? (config.model.provider ? 'configured' : 'scripted');
  const print = (summary: AppDemoSummary) => {
    if (flags.json) return out(JSON.stringify(summary) + '\n');
    out(
      [
        `verdict:       ${summary.verdict ?? 'none'} (stop reason: ${summary.stop_reason ?? 'n/a'}, model: ${summary.model})`,
        `base tests:    ${fmt(summary.base_tests)}`,
        `after edits:   ${fmt(summary.after_tests)}`,
        `clean verify:  ${fmt(summary.verify_tests)}`,
        `pull request:  ${summary.pr ? `#${summary.pr.number} ${summary.pr.draft ? '(draft) ' : ''}${summary.pr.title} ${summary.pr.url}` : 'none'}`,
        ...summary.attempts.map(
          (a) =>
            `attempt ${a.n}:     ${a.verdict}, model ${a.model ?? 'n/a'}, ${a.changed_lines} changed lines, ${usd(a.cost_usd)}${a.published ? ' (published)' : ''} ${a.run_id}`,
        ),
        ...summary.revisions.map(
          (r) =>
            `revision ${r.number}:    ${r.verdict ?? 'no verdict'}, commit ${r.commit ?? 'none'}, ${r.replied_threads} review thread(s) answered`,
        ),
        `cost:          ${usd(summary.cost_usd)}${summary.model === 'scripted' ? ' (at a made-up price for the scripted model)' : ''}`,
        `patch:         ${summary.patch_path ?? 'none'}`,
        `trace:         ${summary.trace_path ?? 'none'}`,
        `result:        ${summary.result}${summary.error ? ` (${summary.error})` : ''}`,
        '',
        ...summary.comments.map(
          (c) =>
            `--- comment on the ${c.on} by ${c.author} (${c.body.length} chars)\n${firstLines(c.body, 12)}\n`,
        ),
        ...(summary.run_url
          ? [
              `run page:      ${summary.run_url}`,
              `sign in:       ${summary.sign_in_url}`,
              'serving until interrupted (Ctrl-C)',
              '',
            ]
          : []),
      ].join('\n'),
    );
  };
  const summary = await runAppDemo({
    config,
    ...compose(config),
    model,
    revise: flags.revise,
    attempts: flags.attempts,
    models: flags.models,
    log,
    serve: flags.serve
      ? async (s) => {
          print(s);
          await untilStopped();
        }
      : undefined,
  });
  if (!flags.serve) print(summary);
  return summary.result === 'success' ? 0 : 1;
}

const firstLines = (s: string, n: number) => {
  const lines = s.split('\n');
  return lines.slice(0, n).join('\n') + (lines.length > n ? `\n  [... ${lines.length - n} more lines]` : '');
};
