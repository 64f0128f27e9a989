#!/usr/bin/env node
/** The `agenticfix` command: one sub-command per user-facing job. */
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/config.js';
import { buildInfo } from '../config/version.js';
import { UsageError, usageLine } from './program.js';

type Handler = (argv: string[]) => Promise<number>;

/** Each command's module is loaded only when it runs: `serve` alone pulls in Probot. */
const COMMANDS: Record<string, { description: string; load: () => Promise<Handler> }> = {
  demo: {
    description: 'run the built-in calculator demo (no GitHub account, no API key)',
    load: async () => (await import('./demo.js')).demoCommand,
  },
  run: {
    description: 'repair one issue in a fresh worktree',
    load: async () => (await import('./run.js')).runCommand,
  },
  verify: {
    description: 'judge a candidate patch in a clean worktree and a fresh container',
    load: async () => (await import('./verify.js')).verifyCommand,
  },
  eval: {
    description: 'run the agent and the judge on a JSON Lines task file',
    load: async () => (await import('./eval.js')).evalCommand,
  },
  serve: {
    description: 'start the GitHub App (Probot) server',
    load: async () => (await import('./serve.js')).serveCommand,
  },
  setup: {
    description: "register the GitHub App from app.yml (Probot's manifest flow) and write .env",
    load: async () => (await import('./setup.js')).setupCommand,
  },
  worker: {
    description: 'take runs from the shared queue (AGENTICFIX_REDIS_URL) and run them on this machine',
    load: async () => (await import('./worker.js')).workerCommand,
  },
  emulator: {
    description: 'start a local GitHub and a scripted model to try serve and worker against',
    load: async () => (await import('./emulator.js')).emulatorCommand,
  },
  doctor: {
    description: 'check the settings and the services serve (or --worker) needs, without starting',
    load: async () => (await import('./doctor.js')).doctorCommand,
  },
  config: {
    description: 'check a repository configuration file (.github/agenticfix.yml) as the app reads it',
    load: async () => (await import('./config-check.js')).configCommand,
  },
  'build-network': {
    description: 'create the build network and install its iptables rules (as root)',
    load: async () => (await import('./build-network.js')).buildNetworkCommand,
  },
};

/** The top level: its help lists the commands; each command parses its own options. */
function topLevel(): Command {
  const program = new Command('agenticfix')
    .usage('<command> [options]')
    .description('Fixes labelled GitHub issues and opens verified draft pull requests.')
    .option('-V, --version', 'print the version, the commit it was built from and the Node.js running it')
    .exitOverride()
    .configureOutput({ outputError: () => {} })
    .addHelpText('after', '\nSee `agenticfix <command> --help` for the options of each.');
  for (const [name, c] of Object.entries(COMMANDS)) program.command(name).description(c.description);
  return program;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V') {
    const b = buildInfo();
    process.stdout.write(`agenticfix ${b.version} (commit ${b.commit}, node ${b.node})\n`);
    return 0;
  }
  const known = name !== undefined ? COMMANDS[name] : undefined;
  if (known) return (await known.load())(rest);
  // `agenticfix help run` is `agenticfix run --help`.
  const helped = name === 'help' && rest.length === 1 ? COMMANDS[rest[0]!] : undefined;
  if (helped) return (await helped.load())(['--help']);
  if (name === undefined) {
    process.stderr.write(topLevel().helpInformation());
    return 2;
  }
  try {
    topLevel().parse(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    if (err.exitCode === 0) return 0;
    process.stderr.write(
      `agenticfix: ${err.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')} (see agenticfix --help)\n`,
    );
    return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // The person's mistakes (a missing file, a bad setting) are one line; anything else keeps its stack.
    if (err instanceof UsageError || err instanceof ConfigError) {
      const name = process.argv[2] ?? '';
      process.stderr.write(
        err instanceof UsageError
          ? usageLine(name, err.message)
          : `agenticfix ${name}: ${err.message.replace(/\s*\n\s*/g, ' ')}\n`,
      );
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`agenticfix: ${String((err as Error)?.stack ?? err)}\n`);
    process.exitCode = 1;
  },
);
