import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseDotenv } from 'dotenv';
import SmeeClient from 'smee-client';
import { z } from 'zod';
import { loadConfig, loadEnv } from '../config/config.js';
import { ENV_SCHEMA } from '../config/env.js';
import { command, parseCli } from './program.js';
import { startSetupServer } from './setup-server.js';

/** Where app.yml and package.json ship: the manifest is built from them. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The variables that make the app: without any of them, `serve` registers it first. */
const CREDENTIALS = ['APP_ID', 'PRIVATE_KEY', 'PRIVATE_KEY_PATH', 'WEBHOOK_SECRET'] as const;

/** None of the app's credentials is set: it was never registered here. */
export const noCredentials = (env: Record<string, string>) => CREDENTIALS.every((k) => !env[k]);

/** Whether `serve` should run the setup flow first: outside production, as Probot. */
export const needsSetup = (env: Record<string, string>) =>
  env.NODE_ENV !== 'production' && noCredentials(env);

/** A value refused for .env: a control character could end its line and add settings of its own. */
export class EnvValueError extends Error {}

/**
 * A .env line dotenv reads back as `value`. A control character is refused (it could end the line and
 * start a setting of its own), except the newlines of a PEM key, written as `\n` in double quotes; so
 * is a value that would not read back as itself.
 */
function envLine(key: string, value: string): string {
  const allowed = key === 'PRIVATE_KEY' ? value.replace(/\n/g, '') : value;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(allowed))
    throw new EnvValueError(`${key}: the value holds a control character; nothing was written`);
  const quoted = value.includes('\n')
    ? [`"${value.replace(/\n/g, '\\n')}"`]
    : [value, `'${value}'`, `"${value}"`, `\`${value}\``];
  const line = quoted.map((q) => `${key}=${q}`).find((l) => parseDotenv(l)[key] === value);
  if (line === undefined)
    throw new EnvValueError(`${key}: the value cannot be written to .env as it is; nothing was written`);
  return line;
}

/**
 * Merges `vars` into `<dir>/.env`, keeping what is there; readable by its owner only, since it now
 * holds the app's private key and webhook secret. Throws EnvValueError, writing nothing, for a value
 * that would not read back as itself.
 */
export function writeEnvFile(dir: string, vars: Record<string, string>): string {
  const file = path.join(dir, '.env');
  const kept = existsSync(file) ? parseDotenv(readFileSync(file)) : {};
  const lines = Object.entries({ ...kept, ...vars }).map(([k, v]) => `${envLine(k, v)}\n`);
  writeFileSync(file, lines.join(''), { mode: 0o600 });
  chmodSync(file, 0o600);
  return file;
}

/**
 * GitHub's manifest flow (setup-server.ts): a page on HOST:PORT, reachable only with the one-time token
 * printed here, posts app.yml's manifest to GitHub (GHE_HOST, or github.com), GitHub creates the app
 * and sends the browser back with a code, which is converted into the app's id, private key, webhook
 * secret and OAuth client, written to ./.env. Resolves with that file once they are written and the
 * setup server has stopped.
 */
export async function runSetup(name: string): Promise<string> {
  const cwd = process.cwd();
  const env = loadEnv();
  // A smee.io channel relays GitHub's deliveries to a machine GitHub cannot reach (as Probot's setup).
  if (env.NODE_ENV !== 'production' && !env.WEBHOOK_PROXY_URL && env.NO_SMEE_SETUP !== 'true') {
    const channel = await SmeeClient.createChannel().catch(() => null);
    if (channel) env.WEBHOOK_PROXY_URL = writeChannel(cwd, channel);
  }
  const file = path.join(cwd, '.env');
  const server = await startSetupServer({
    host: env.HOST || 'localhost',
    port: Number(env.PORT) || 3000,
    packageDir: existsSync(path.join(cwd, 'app.yml')) ? cwd : PACKAGE_ROOT,
    env,
    trustProxy: ENV_SCHEMA.shape.AGENTICFIX_TRUST_PROXY.safeParse(env.AGENTICFIX_TRUST_PROXY).data ?? false,
    save: (vars) => void writeEnvFile(cwd, vars),
    limits: loadConfig(env).http,
  });
  process.stdout.write(
    `agenticfix ${name}: open ${server.url} to register the app on ${env.GHE_HOST ?? 'github.com'} from app.yml; its credentials go to ${file}\n` +
      `agenticfix ${name}: the address holds a one-time token: only who has it can finish the setup\n`,
  );
  await server.done;
  await server.close();
  process.stdout.write(`agenticfix ${name}: the app is registered; wrote ${file}\n`);
  return file;
}

const writeChannel = (cwd: string, channel: string) => (
  writeEnvFile(cwd, { WEBHOOK_PROXY_URL: channel }),
  channel
);

/** `agenticfix setup`: register the GitHub App through Probot's manifest flow, on purpose. */
export async function setupCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command(
      'setup',
      "register the GitHub App from app.yml (GitHub's manifest flow) and write .env",
    ).addHelpText(
      'after',
      '\nServes the setup page on HOST:PORT (default localhost:3000) at the address it prints, which holds a\n' +
        'one-time token; GHE_HOST (and GHE_PROTOCOL) for GitHub Enterprise, GH_ORG to register it for an\n' +
        'organisation. Exits once .env holds APP_ID, PRIVATE_KEY, WEBHOOK_SECRET and the OAuth client.\n',
    ),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  await runSetup('setup');
  process.stdout.write('agenticfix setup: start it with `agenticfix serve`\n');
  return 0;
}
