import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { loadConfig } from '../config/config.js';
import {
  CALCULATOR_ISSUE,
  CALCULATOR_TEST_ARGV,
  calculatorFixCalls,
  calculatorScript,
  repoSource,
} from '../demo/calculator.js';
import { startGitHubEmulator } from '../emulator/github.js';
import { startScriptedModelServer } from '../emulator/scripted-model.js';
import { WEBHOOK_PATH } from '../webhook/server.js';
import { emulatorAppEnv, untilStopped } from './app-env.js';
import { command, parseCli } from './program.js';

export const EMULATOR_OWNER = 'octo-demo';
export const EMULATOR_REPO = 'calculator';
const MAINTAINER = 'maintainer-mona';

const cli = () =>
  command('emulator', 'start a local GitHub and a scripted model to try serve and worker against')
    .option('--serve <url>', 'where `agenticfix serve` listens: webhooks go there', 'http://127.0.0.1:3000')
    .option('--host <address>', 'where the emulator and the model listen (their URLs name it)', '127.0.0.1')
    .option('--port <port>', "the emulator's port (0: any free one)", '0')
    .option('--model-port <port>', "the scripted model's port (0: any free one)", '0')
    .option('--dir <path>', 'keep the repositories and the private key here (default: a temporary directory)')
    .option('--no-label', 'do not label the demo issue once serve answers')
    .option('--json', 'print the environment and then each event as one JSON object a line', false)
    .addHelpText(
      'after',
      '\nPrints the settings for `agenticfix serve` and `agenticfix worker` (export lines, valid in .env too;\n' +
        'HOST and PORT apart, for serve on this machine only), waits until serve answers on --serve, then\n' +
        'labels the demo issue as a maintainer would: a signed `issues.labeled` webhook. `label [n]` on its\n' +
        'standard input labels issue n (default 1) again; issue 2 is a second one to try. It reports each\n' +
        'pull request the app opens, and runs until SIGINT or SIGTERM.\n',
    );

const Port = z.coerce.number().int().min(0).max(65535);
const Flags = z.strictObject({
  serve: z.url({ protocol: /^https?$/ }),
  host: z.string().min(1),
  port: Port,
  modelPort: Port,
  dir: z.string().min(1).optional(),
  label: z.boolean(),
  json: z.boolean(),
});

/** Single quotes for the shell (and for .env, where dotenv drops them). */
const quoted = (v: string) => (/^[\w@%+=:,./-]*$/.test(v) ? v : `'${v.replace(/'/g, `'\\''`)}'`);

/**
 * `agenticfix emulator`: the demo's GitHub (the calculator repository and an issue) and a scripted model
 * that fixes it, for running `serve` and `worker` by hand. Nothing is sent to github.com.
 */
export async function emulatorCommand(argv: string[]): Promise<number> {
  const parsed = parseCli(cli(), Flags, argv);
  if (typeof parsed === 'number') return parsed;
  const flags = parsed.opts;
  const config = loadConfig();
  const dir = flags.dir ? path.resolve(flags.dir) : mkdtempSync(path.join(tmpdir(), 'agenticfix-emulator-'));
  mkdirSync(dir, { recursive: true });
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPath = path.join(dir, 'private-key.pem');
  writeFileSync(keyPath, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), {
    mode: 0o600,
  });
  const secret = randomBytes(16).toString('hex');
  const serve = new URL(flags.serve);
  const emu = await startGitHubEmulator({
    webhookSecret: secret,
    webhookUrl: new URL(WEBHOOK_PATH, serve).href,
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    dataDir: path.join(dir, 'github'),
    host: flags.host,
    port: flags.port,
  });
  // Each run (a relabel, a rerun) replays the whole script.
  const model = await startScriptedModelServer(
    calculatorScript(
      config.sandbox.baseImage,
      calculatorFixCalls(),
      'subtract now computes a - b, and divide throws a RangeError when dividing by zero; all five tests pass.',
    ),
    { model: 'scripted', perConversation: true, host: flags.host, port: flags.modelPort },
  );
  emu.createRepo(EMULATOR_OWNER, EMULATOR_REPO, { fromDir: repoSource(dir, CALCULATOR_TEST_ARGV) });
  emu.setPermission(EMULATOR_OWNER, EMULATOR_REPO, MAINTAINER, 'write');
  const [title, ...body] = CALCULATOR_ISSUE.replace(/^# /, '').split('\n');
  const issue = emu.createIssue(EMULATOR_OWNER, EMULATOR_REPO, {
    title: title!,
    body: body.join('\n').trim(),
    user: 'reporter-ray',
  });
  // A second issue to label by hand (the scripted model repairs the calculator whichever it is given).
  const second = emu.createIssue(EMULATOR_OWNER, EMULATOR_REPO, {
    title: 'divide(1, 0) returns Infinity',
    body: '`divide(1, 0)` should throw a `RangeError`; `test/calculator.test.js` says so.',
    user: 'reporter-ray',
  });

  const env = {
    ...emulatorAppEnv({
      githubUrl: emu.url,
      appId: emu.appId,
      key: { PRIVATE_KEY_PATH: keyPath },
      modelUrl: model.url,
    }),
    WEBHOOK_SECRET: secret,
    // The run pages' sign-in: the emulator's OAuth client, and where serve is seen from the browser.
    GITHUB_CLIENT_ID: emu.oauth.clientId,
    GITHUB_CLIENT_SECRET: emu.oauth.clientSecret,
    AGENTICFIX_PUBLIC_URL: serve.origin,
  };
  /**
   * Where serve listens: for serve started by hand on this machine. In a container's .env they would
   * move the image's 0.0.0.0:3000 (unreachable from outside, its healthcheck failing): kept apart.
   */
  const local = { HOST: serve.hostname, PORT: serve.port || (serve.protocol === 'https:' ? '443' : '80') };
  const repo = `${EMULATOR_OWNER}/${EMULATOR_REPO}`;
  const say = (event: Record<string, unknown>, line: string) =>
    process.stdout.write(flags.json ? `${JSON.stringify(event)}\n` : `${line}\n`);
  say(
    {
      event: 'ready',
      env: { ...env, ...local },
      local_only: Object.keys(local),
      issues: [issue, second],
      github: emu.url,
      model: model.url,
      repository: repo,
      issue,
      webhook: new URL(WEBHOOK_PATH, serve).href,
    },
    [
      `# GitHub emulator on ${emu.url} (${repo}, issue #${issue}); scripted model on ${model.url}.`,
      '# The environment of `agenticfix serve` and `agenticfix worker` (paste into their shells or .env;',
      '# a worker also needs AGENTICFIX_REDIS_URL and AGENTICFIX_DATABASE_URL, as serve then does):',
      ...Object.entries(env).map(([k, v]) => `export ${k}=${quoted(v)}`),
      "# serve run by hand on this machine only: not in a container's .env (the image listens on 0.0.0.0:3000):",
      ...Object.entries(local).map(([k, v]) => `export ${k}=${quoted(v)}`),
      `# Issue #${second} is a second one to try. Type \`label ${second}\` (or \`label\` for #${issue}) and Enter here to label again.`,
      flags.label
        ? `# Once serve answers on ${serve.origin}, ${MAINTAINER} labels issue #${issue} '${config.app.label}'.`
        : `# Label issue #${issue} yourself: nothing is labelled (--no-label).`,
    ].join('\n'),
  );

  let stopped = false;
  const label = async (n: number) => {
    const delivery = await emu.label(EMULATOR_OWNER, EMULATOR_REPO, n, config.app.label, MAINTAINER);
    say(
      { event: 'labeled', issue: n, label: config.app.label, status: delivery.status },
      `${MAINTAINER} labelled #${n} '${config.app.label}': serve answered the webhook with HTTP ${delivery.status}`,
    );
  };
  // `label [n]` on standard input labels again (the app starts a new run; one per issue at a time).
  const input = createInterface({ input: process.stdin, terminal: false });
  input.on('line', (line) => {
    const m = /^\s*label(?:\s+#?(\d+))?\s*$/.exec(line);
    const n = m ? Number(m[1] ?? issue) : null;
    if (n !== issue && n !== second) {
      if (line.trim()) say({ event: 'unknown', line }, `type \`label ${issue}\` or \`label ${second}\``);
      return;
    }
    label(n).catch((err: unknown) =>
      say({ event: 'error', error: String(err) }, `could not label #${n}: ${String(err)}`),
    );
  });
  const labelWhenServeAnswers = async () => {
    while (!stopped) {
      const up = await fetch(new URL('/ping', serve), { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    if (stopped) return;
    await label(issue);
  };
  const labelling = flags.label
    ? labelWhenServeAnswers().catch((err: unknown) => {
        say({ event: 'error', error: String(err) }, `could not label #${issue}: ${String(err)}`);
      })
    : Promise.resolve();
  // Reports each pull request the app opens.
  const seen = new Set<number>();
  const watch = setInterval(() => {
    for (const p of emu.pulls)
      if (p.pull && !seen.has(p.number)) {
        seen.add(p.number);
        const url = `${emu.url}/${repo}/pull/${p.number}`;
        say(
          { event: 'pull_request', number: p.number, draft: p.pull.draft, title: p.title, url },
          `the app opened ${p.pull.draft ? 'draft ' : ''}pull request #${p.number} "${p.title}" ${url}`,
        );
      }
  }, 1000);

  await untilStopped();
  stopped = true;
  clearInterval(watch);
  input.close();
  process.stdin.destroy();
  await labelling;
  await model.close();
  await emu.close();
  if (!flags.dir) rmSync(dir, { recursive: true, force: true });
  return 0;
}
