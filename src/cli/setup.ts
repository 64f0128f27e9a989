import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseDotenv } from 'dotenv';
import { run } from 'probot';
import SmeeClient from 'smee-client';
import { z } from 'zod';
import { loadEnv } from '../config/config.js';
import { command, parseCli } from './program.js';

/** Where app.yml and package.json ship: Probot's setup builds the manifest from them. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The variables that make the app: without any of them, `serve` registers it first. */
const CREDENTIALS = ['APP_ID', 'PRIVATE_KEY', 'PRIVATE_KEY_PATH', 'WEBHOOK_SECRET'] as const;

/** None of the app's credentials is set: it was never registered here. */
export const noCredentials = (env: Record<string, string>) => CREDENTIALS.every((k) => !env[k]);

/** Whether `serve` should run the setup flow first: outside production, as Probot. */
export const needsSetup = (env: Record<string, string>) =>
  env.NODE_ENV !== 'production' && noCredentials(env);

/** A .env line dotenv reads back as `value` (Probot hands over the key quoted, with newlines). */
function envLine(key: string, raw: string): string {
  const value = raw.replace(/^"([\s\S]*)"$/, '$1');
  if (value.includes('\n')) return `${key}="${value.replace(/\n/g, '\\n')}"`;
  return /[\s#'"]/.test(value) ? `${key}='${value}'` : `${key}=${value}`;
}

/**
 * Merges `vars` into `<dir>/.env`, keeping what is there; readable by its owner only, since it now
 * holds the app's private key and webhook secret.
 */
export function writeEnvFile(dir: string, vars: Record<string, string>): string {
  const file = path.join(dir, '.env');
  const kept = existsSync(file) ? parseDotenv(readFileSync(file)) : {};
  const merged = { ...kept, ...vars };
  writeFileSync(
    file,
    Object.entries(merged)
      .map(([k, v]) => `${envLine(k, v)}\n`)
      .join(''),
    { mode: 0o600 },
  );
  chmodSync(file, 0o600);
  return file;
}

/**
 * Probot's manifest flow: a page on HOST:PORT posts app.yml's manifest to GitHub (GHE_HOST, or
 * github.com), GitHub creates the app and sends the browser back with a code, which is converted into
 * the app's id, private key and webhook secret, written to ./.env. Resolves with that file once they
 * are written and the setup server has stopped.
 */
export async function runSetup(name: string): Promise<string> {
  const cwd = process.cwd();
  const env = loadEnv();
  let done!: (file: string) => void;
  const written = new Promise<string>((resolve) => (done = resolve));
  // Probot reads app.yml and package.json from the working directory.
  if (!existsSync(path.join(cwd, 'app.yml'))) process.chdir(PACKAGE_ROOT);
  const server = await run(() => {}, {
    // Without the credentials, or Probot would start the app instead of its setup.
    env: Object.fromEntries(
      Object.entries(env).filter(([k]) => !(CREDENTIALS as readonly string[]).includes(k)),
    ),
    SmeeClient,
    updateEnv: (vars: NodeJS.ProcessEnv) => {
      const file = writeEnvFile(
        cwd,
        Object.fromEntries(Object.entries(vars).filter((e): e is [string, string] => e[1] !== undefined)),
      );
      // The browser is redirected to the new app's installation page after this returns.
      if (vars.APP_ID) setTimeout(() => done(file), 500);
      return vars;
    },
  });
  process.stdout.write(
    `agenticfix ${name}: open http://${server.host === '0.0.0.0' ? 'localhost' : server.host}:${server.port} to register the app on ${env.GHE_HOST ?? 'github.com'} from app.yml; its credentials go to ${path.join(cwd, '.env')}\n`,
  );
  const file = await written;
  await server.stop();
  process.chdir(cwd);
  process.stdout.write(`agenticfix ${name}: the app is registered; wrote ${file}\n`);
  return file;
}

/** `agenticfix setup`: register the GitHub App through Probot's manifest flow, on purpose. */
export async function setupCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(
    command(
      'setup',
      "register the GitHub App from app.yml (Probot's manifest flow) and write .env",
    ).addHelpText(
      'after',
      '\nServes the setup page on HOST:PORT (default localhost:3000); GHE_HOST (and GHE_PROTOCOL) for GitHub\n' +
        'Enterprise, GH_ORG to register it for an organisation. Exits once .env holds APP_ID, PRIVATE_KEY and\n' +
        'WEBHOOK_SECRET.\n',
    ),
    z.strictObject({}),
    argv,
  );
  if (typeof parsed === 'number') return parsed;
  // Probot refuses its setup in production; here it was asked for.
  delete process.env.NODE_ENV;
  await runSetup('setup');
  process.stdout.write('agenticfix setup: start it with `agenticfix serve`\n');
  return 0;
}
