import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Command, CommanderError, type OptionValues } from 'commander';
import type { z } from 'zod';
import { isUrl } from '../workspace/remote.js';

/** A mistake of the person at the terminal: printed as one line, without a stack, exit 2. */
export class UsageError extends Error {}

/**
 * A sub-command's parser. Commander writes help itself; its errors are left to `parseCli`, which puts
 * them on one line with the command's name.
 */
export function command(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .exitOverride()
    .allowExcessArguments(false)
    .configureHelp({ commandUsage: (c) => `agenticfix ${c.name()} ${c.usage()}` })
    .configureOutput({
      writeOut: (s) => process.stdout.write(s),
      writeErr: (s) => process.stderr.write(s),
      outputError: () => {},
    });
}

/** One usage line: `agenticfix run: unknown option '--bogus' (see agenticfix run --help)`. */
export const usageLine = (name: string, problem: string) =>
  `agenticfix ${name}: ${problem.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')} (see agenticfix ${name} --help)\n`;

/**
 * Parses `argv` with `cmd` and validates the options with `schema` (flags named as typed, `--keep-worktree`,
 * in its messages). A number is the exit code to return at once: 0 after `--help`, 2 after a usage line.
 */
export function parseCli<S extends z.ZodType>(
  cmd: Command,
  schema: S,
  argv: string[],
): { opts: z.infer<S>; args: string[] } | number {
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    if (err.exitCode === 0) return 0;
    process.stderr.write(usageLine(cmd.name(), err.message));
    return 2;
  }
  const parsed = schema.safeParse(cmd.opts<OptionValues>());
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => {
      if (i.path.length === 0) return i.message;
      const flag = flagName(String(i.path[0]));
      // Required flags are checked here rather than by commander, so that an unknown flag is reported first.
      return i.code === 'invalid_type' && i.input === undefined
        ? `${flag} is required`
        : `${flag}: ${i.message}`;
    });
    process.stderr.write(usageLine(cmd.name(), problems.join('; ')));
    return 2;
  }
  return { opts: parsed.data, args: cmd.args };
}

const flagName = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** A file named by a flag, read relative to the working directory; a missing one is a usage error. */
export function readUserFile(flag: string, file: string): string {
  try {
    return readFileSync(path.resolve(file), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(`${flag} ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? String(err))}`);
  }
}

/** A file named on the command line, resolved against the working directory; a missing one is a usage error. */
export function userFile(flag: string, file: string): string {
  const resolved = path.resolve(file);
  if (!existsSync(resolved)) throw new UsageError(`${flag} ${file}: no such file`);
  return resolved;
}

/** A repository given as a path (not a URL or `user@host:path`) resolved against the working directory. */
export const resolveRepo = (repo: string) => (isUrl(repo) ? repo : path.resolve(repo));
