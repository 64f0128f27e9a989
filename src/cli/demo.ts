import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import { runToolsOnlyDemo } from '../demo/tools-only.js';

const Flags = z.strictObject({
  json: z.boolean().default(false),
  'keep-worktrees': z.boolean().default(false),
  'tools-only': z.boolean().default(false),
  sandbox: z.enum(['local', 'docker']).optional(),
  model: z.string().optional(),
});

export async function demoCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      json: { type: 'boolean' },
      'keep-worktrees': { type: 'boolean' },
      'tools-only': { type: 'boolean' },
      sandbox: { type: 'string' },
      model: { type: 'string' },
    },
    strict: true,
  });
  const flags = Flags.parse(values);
  const config = loadConfig();
  const log = flags.json ? () => {} : (line: string) => process.stdout.write(`  ${line}\n`);
  const summary = await runToolsOnlyDemo({
    config,
    sandbox: flags.sandbox ?? 'local',
    keepWorktrees: flags['keep-worktrees'],
    log,
  });
  if (flags.json) process.stdout.write(JSON.stringify(summary) + '\n');
  else {
    const fmt = (c: { passed: number; failed: number } | null) => (c ? `${c.passed} passed, ${c.failed} failed` : 'n/a');
    process.stdout.write(
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
  }
  return summary.result === 'success' ? 0 : 1;
}
