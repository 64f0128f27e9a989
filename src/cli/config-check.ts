import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { loadConfig, loadEnv } from '../config/config.js';
import { parseRepoConfig, REPO_CONFIG_MAX_BYTES, REPO_CONFIG_PATH } from '../config/repo-config.js';
import { overSize } from '../config/repo-file.js';
import { command, parseCli, usageLine, UsageError } from './program.js';

/**
 * `agenticfix config check [file]`: a repository's `.github/agenticfix.yml` checked before it is pushed,
 * with the parser and the messages the app posts on the issue, against the operator limits of this
 * environment (its `.env` and variables; the defaults without them). Exit 0 when valid, 2 when not.
 */
export async function configCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'check') {
    const help = sub === '--help' || sub === '-h';
    if (help || sub === undefined)
      (help ? process.stdout : process.stderr).write(
        `Usage: agenticfix config check [file]   (default: ${REPO_CONFIG_PATH}; see agenticfix config check --help)\n`,
      );
    else
      process.stderr.write(
        usageLine('config', `unknown ${sub.startsWith('-') ? 'option' : 'command'} '${sub}'`),
      );
    return help ? 0 : 2;
  }
  const cmd = command('config check', 'check a repository configuration file as the app reads it')
    .argument('[file]', 'the file', REPO_CONFIG_PATH)
    .option('--json', 'print {"ok": …, "error"?: …}');
  const parsed = parseCli(cmd, z.object({ json: z.boolean().optional() }), rest);
  if (typeof parsed === 'number') return parsed;
  const file = parsed.args[0] ?? REPO_CONFIG_PATH;
  let size: number;
  try {
    size = statSync(file).size;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(`${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? String(err))}`);
  }
  const r =
    size > REPO_CONFIG_MAX_BYTES
      ? { ok: false as const, error: overSize(REPO_CONFIG_PATH, size, REPO_CONFIG_MAX_BYTES) }
      : parseRepoConfig(readFileSync(file, 'utf8'), loadConfig(loadEnv()));
  if (parsed.opts.json) process.stdout.write(`${JSON.stringify(r.ok ? { ok: true } : r)}\n`);
  else if (r.ok) process.stdout.write(`${file}: valid\n`);
  else process.stderr.write(`${file}:\n${r.error}\n`);
  return r.ok ? 0 : 2;
}
