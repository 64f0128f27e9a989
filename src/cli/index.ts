#!/usr/bin/env node
/** The `agenticfix` command: one sub-command per user-facing job. */
import { ConfigError } from '../config/config.js';

const USAGE = `usage: agenticfix <command> [options]

commands:
  demo     run the built-in calculator demo (no GitHub account, no API key)
  run      repair one issue in a fresh worktree
  verify   judge a candidate patch in a clean worktree and a fresh container
  eval     run the agent and the judge on a JSON Lines task file
  serve    start the GitHub App (Probot) server
  worker   take runs from the shared queue (AGENTICFIX_REDIS_URL) and run them on this machine
  build-network  create the build network and install its iptables rules (as root)
`;

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  demo: async () => (await import('./demo.js')).demoCommand,
  run: async () => (await import('./run.js')).runCommand,
  verify: async () => (await import('./verify.js')).verifyCommand,
  eval: async () => (await import('./eval.js')).evalCommand,
  serve: async () => (await import('./serve.js')).serveCommand,
  worker: async () => (await import('./worker.js')).workerCommand,
  'build-network': async () => (await import('./build-network.js')).buildNetworkCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`unknown command: ${name}\n${USAGE}`);
    return 2;
  }
  return (await load())(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(
      `agenticfix: ${err instanceof ConfigError ? err.message : String((err as Error)?.stack ?? err)}\n`,
    );
    process.exitCode = 1;
  },
);
