import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { Config } from '../config/config.js';
import { startGitHubEmulator } from '../emulator/github.js';
import { startScriptedModelServer } from '../emulator/scripted-model.js';
import { recordedAttempts } from '../pipeline/attempts.js';
import type { ModelSpec } from '../pipeline/types.js';
import type { Parts } from '../verify/types.js';
import { startApp } from '../app.js';
import {
  CALCULATOR_ISSUE,
  CALCULATOR_TEST_ARGV,
  calculatorAttemptCalls,
  calculatorFixCalls,
  calculatorRevisionCalls,
  calculatorScript,
  fixedCalculator,
  repoSource,
} from './calculator.js';

type Counts = { passed: number; failed: number };

export interface AppDemoSummary {
  result: 'success' | 'failure';
  verdict: string | null;
  base_tests: Counts | null;
  after_tests: Counts | null;
  verify_tests: Counts | null;
  patch_path: string | null;
  trace_path: string | null;
  run_id: string | null;
  stop_reason: string | null;
  model: string;
  /** What the run's model requests cost in USD (null: the model has no price). */
  cost_usd: number | null;
  pr: { number: number; draft: boolean; url: string; title: string; head: string } | null;
  comments: { on: 'issue' | 'pr'; author: string; body: string }[];
  /** Revisions of the pull request (`--revise`), oldest first. */
  revisions: {
    number: number;
    commit: string | null;
    verdict: string | null;
    cost_usd: number | null;
    replied_threads: number;
  }[];
  /** Commits on the pull request's branch at the end. */
  pr_commits: number | null;
  /** The run's page (`--serve`: the app keeps serving it), else null. */
  run_url: string | null;
  /** Signs the emulated maintainer in and opens the run page (`--serve`), else null. */
  sign_in_url: string | null;
  /** `--attempts`: each attempt's outcome, the published one marked (one attempt: empty). */
  attempts: {
    n: number;
    run_id: string;
    /** The model its requests named: its entry of `--models`, else the operator's. */
    model: string | null;
    verdict: string;
    changed_lines: number;
    published: boolean;
    cost_usd: number | null;
  }[];
  /** When the maintainer labelled the issue, and from then to the end of its run: the draft PR open, its comments posted. */
  labelled_at: string | null;
  label_to_pr_ms: number | null;
  /** `again`: the second issue's run, on the same repository and app, timed as the first. */
  again: {
    run_id: string;
    verdict: string | null;
    trace_path: string | null;
    labelled_at: string;
    label_to_pr_ms: number;
  } | null;
  error: string | null;
}

const OWNER = 'octo-demo';
const REPO = 'calculator';
const MAINTAINER = 'maintainer-mona';
const REVIEW_COMMENT = 'Make the error message name the argument.';
const SCRIPTED_MODEL = 'scripted-demo-model';
/**
 * A made-up price for the scripted model (of the order of hosted models' prices), so the demo shows
 * what a run costs; an operator's AGENTICFIX_MODEL_PRICES entry for it wins.
 */
const SCRIPTED_PRICE = { input: 1, cached_input: 0.1, output: 4 };

/**
 * The whole product on an embedded default: a local GitHub emulator holds the calculator repository
 * and an issue; a maintainer labels it; the real Probot app receives the signed webhook, runs the
 * agent (the scripted model unless a real one is configured) in the Docker sandbox, has the judge
 * verify the patch from scratch, and opens a draft pull request with the evidence.
 */
/** With the process's parts (src/cli/compose.ts). */
export async function runAppDemo(
  opts: Parts & {
    config: Config;
    model: 'scripted' | 'configured';
    /** Then the maintainer reviews the draft asking for a change, and the app revises it. */
    revise?: boolean;
    /**
     * Then, `afterMs` after the first run ended, a second issue on the same repository is labelled and run
     * to its end: a user's second run (the mirror fetched, the images built), the benchmark's warm run.
     */
    again?: { afterMs: number };
    /** Called as each issue is labelled (the benchmark reads its counters there). */
    onLabel?: () => void;
    /**
     * Attempts of the run (repository `attempts`), side by side as the queue's slots allow; the scripted
     * ones fail, fix verbosely, fix minimally, in the order they start.
     */
    attempts?: number;
    /**
     * The models the attempts take in turn (repository `models`). Scripted: allowed and priced as the
     * scripted model is; a configured model's names must be on the operator's allowlist.
     */
    models?: string[];
    log: (line: string) => void;
    /**
     * Keep serving the run pages (`--serve`): called with the summary once the demo is over; the app,
     * the emulator and the model stay up until it resolves.
     */
    serve?: (summary: AppDemoSummary) => Promise<void>;
  },
): Promise<AppDemoSummary> {
  const { config, log } = opts;
  const attempts = opts.attempts ?? 1;
  const work = mkdtempSync(path.join(tmpdir(), 'agenticfix-demo-'));
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const secret = randomBytes(16).toString('hex');
  const emu = await startGitHubEmulator({
    webhookSecret: secret,
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    dataDir: path.join(work, 'github'),
  });
  const revision = opts.revise
    ? [
        calculatorScript(
          config.sandbox.baseImage,
          calculatorRevisionCalls(),
          "divide's RangeError now names the divisor b; all five tests pass.",
        ),
      ]
    : [];
  // Attempts run side by side (as many as the queue has slots): each conversation replays a script of
  // its own, handed out in the order they start; the revision's comes after them.
  const attemptScripts = Array.from({ length: attempts }, (_, i) =>
    calculatorScript(config.sandbox.baseImage, calculatorAttemptCalls(i + 1), `attempt ${i + 1} done.`),
  );
  const againScript = opts.again
    ? [calculatorScript(config.sandbox.baseImage, calculatorFixCalls(), 'fixed.')]
    : [];
  const fix = calculatorScript(
    config.sandbox.baseImage,
    calculatorFixCalls(),
    'subtract now computes a - b, and divide throws a RangeError when dividing by zero; all five tests pass.',
  );
  const scripted =
    opts.model !== 'scripted'
      ? null
      : attempts > 1
        ? await startScriptedModelServer([], {
            model: SCRIPTED_MODEL,
            instances: [...attemptScripts, ...revision, ...againScript],
          })
        : await startScriptedModelServer([fix, ...revision, ...againScript].flat(), {
            model: SCRIPTED_MODEL,
          });
  const model: ModelSpec = scripted
    ? { kind: 'url', baseUrl: scripted.url, name: SCRIPTED_MODEL }
    : { kind: 'openai' };
  const models = opts.models ?? [];
  const scriptedNames = scripted ? [SCRIPTED_MODEL, ...models] : [];
  // The demo's run store is its own, so a demo never reports another server's runs as interrupted.
  const app = await startApp({
    config: {
      ...config,
      dbPath: path.join(work, 'runs.sqlite'),
      databaseUrl: null,
      distributed: null,
      ceilings: { ...config.ceilings, attempts: Math.max(config.ceilings.attempts, attempts) },
      model: {
        ...config.model,
        allowlist: [...new Set([...config.model.allowlist, ...scriptedNames.slice(1)])],
        prices: {
          ...Object.fromEntries(scriptedNames.map((m) => [m, SCRIPTED_PRICE])),
          ...config.model.prices,
        },
      },
      // The emulator's OAuth client signs people in to the run pages.
      web: {
        publicUrl: null,
        clientId: emu.oauth.clientId,
        clientSecret: emu.oauth.clientSecret,
        trustProxy: false,
      },
    },
    appId: emu.appId,
    privateKey: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    webhookSecret: secret,
    baseUrl: emu.url,
    port: 0,
    workspaces: opts.workspaces,
    images: opts.images,
    sandboxes: opts.sandboxes,
    model,
    sandbox: 'docker',
    checkMounts: true,
    log: pino({ level: 'silent' }),
    livePollMs: 250,
  });
  const site = app.url.replace(/\/api\/github\/webhooks$/, '');
  const pageOf = (id: string) => ({
    run_url: `${site}/runs/${id}`,
    sign_in_url: `${site}/login?login=${MAINTAINER}&next=${encodeURIComponent(`/runs/${id}`)}`,
  });
  const summary: AppDemoSummary = {
    result: 'failure',
    verdict: null,
    base_tests: null,
    after_tests: null,
    verify_tests: null,
    patch_path: null,
    trace_path: null,
    run_id: null,
    stop_reason: null,
    model: scripted ? 'scripted' : (config.model.name ?? config.model.provider ?? 'configured'),
    cost_usd: null,
    pr: null,
    comments: [],
    revisions: [],
    pr_commits: null,
    run_url: null,
    sign_in_url: null,
    attempts: [],
    labelled_at: null,
    label_to_pr_ms: null,
    again: null,
    error: null,
  };
  try {
    emu.setWebhookUrl(app.url);
    const more =
      (opts.revise ? 'revise_on: [command, changes_requested]\n' : '') +
      (attempts > 1 ? `attempts: ${attempts}\n` : '') +
      (models.length > 0 ? `models: ${JSON.stringify(models)}\n` : '');
    emu.createRepo(OWNER, REPO, { fromDir: repoSource(work, CALCULATOR_TEST_ARGV, { more }) });
    emu.setPermission(OWNER, REPO, MAINTAINER, 'write');
    const [title, ...body] = CALCULATOR_ISSUE.replace(/^# /, '').split('\n');
    /** Files the calculator issue, labels it and waits for the app to end its run (its comments posted). */
    const fileAndLabel = async () => {
      const issue = emu.createIssue(OWNER, REPO, {
        title: title!,
        body: body.join('\n').trim(),
        user: 'reporter-ray',
      });
      log(`GitHub emulator ${emu.url}: ${OWNER}/${REPO} issue #${issue}`);
      log(`${MAINTAINER} labels #${issue} '${config.app.label}' → signed webhook to ${app.url}`);
      opts.onLabel?.();
      const labelled_at = new Date().toISOString();
      const labelled = performance.now();
      const delivery = await emu.label(OWNER, REPO, issue, config.app.label, MAINTAINER);
      log(`webhook acknowledged: HTTP ${delivery.status}`);
      const started = (await app.store.forIssue(OWNER, REPO, issue))[0];
      if (opts.serve && started) log(`run page (live): ${pageOf(started.id).sign_in_url}`);
      await app.idle();
      const label_to_pr_ms = Math.round(performance.now() - labelled);
      const run = (await app.store.forIssue(OWNER, REPO, issue)).find((r) => r.revision === null);
      if (!run) throw new Error(`the app started no run for #${issue}`);
      return { issue, run, labelled_at, label_to_pr_ms };
    };
    const { issue, run, ...timed } = await fileAndLabel();
    Object.assign(summary, timed);
    const opened = emu.pulls.find((p) => p.pull);
    if (opts.revise && opened) {
      const [, line] = fixedCalculator();
      log(`${MAINTAINER} reviews #${opened.number}: changes requested on src/calculator.js:${line}`);
      await emu.review(OWNER, REPO, opened.number, {
        user: MAINTAINER,
        state: 'request_changes',
        body: 'Nearly there.',
        comments: [{ path: 'src/calculator.js', line, body: REVIEW_COMMENT }],
      });
      await app.idle();
      const replies = emu.reviewComments(opened.number).filter((c) => c.user === emu.botLogin);
      summary.revisions = (await app.store.forIssue(OWNER, REPO, issue))
        .filter((r) => r.revision !== null)
        .reverse()
        .map((r) => ({
          number: r.revision!,
          commit: r.pushed_commit,
          verdict: r.verdict,
          cost_usd: r.cost_usd,
          replied_threads: replies.filter((c) => r.pushed_commit && c.body.includes(r.pushed_commit)).length,
        }));
    }
    if (opts.again) {
      await new Promise((resolve) => setTimeout(resolve, opts.again!.afterMs));
      const second = await fileAndLabel();
      summary.again = {
        run_id: second.run.id,
        verdict: second.run.verdict,
        trace_path: second.run.run_dir && path.join(second.run.run_dir, 'events.jsonl'),
        labelled_at: second.labelled_at,
        label_to_pr_ms: second.label_to_pr_ms,
      };
    }
    summary.run_id = run.id;
    summary.verdict = run.verdict;
    summary.stop_reason = run.stop_reason;
    summary.cost_usd = run.cost_usd;
    summary.patch_path = run.patch_path;
    const operatorModel = scripted ? SCRIPTED_MODEL : (config.model.name ?? null);
    summary.attempts = recordedAttempts(run).map((a) => ({
      n: a.n,
      run_id: a.run_id,
      model: a.model ?? operatorModel,
      verdict: a.verdict,
      changed_lines: a.changed_lines,
      published: a.published,
      cost_usd: a.cost_usd,
    }));
    if (run.run_dir) {
      summary.trace_path = path.join(run.run_dir, 'events.jsonl');
      const result = readJson<{ last_test?: { summary?: SavedCounts } | null }>(
        path.join(run.run_dir, 'result.json'),
      );
      summary.after_tests = counts(result?.last_test?.summary);
      const published = summary.attempts.find((a) => a.published)?.run_id ?? run.id;
      const report = readJson<{ cells?: { name: string; counts: SavedCounts }[] }>(
        path.join(config.runsDir, `${published}-verify`, 'report.json'),
      );
      const cell = (name: string) => report?.cells?.find((c) => c.name === name);
      summary.base_tests = counts(cell('base')?.counts);
      summary.verify_tests = counts(cell('patched')?.counts);
    }
    const pr = emu.pulls.find((p) => p.pull);
    if (pr) summary.pr_commits = emu.pullCommits(OWNER, REPO, pr.number).length;
    if (pr?.pull)
      summary.pr = {
        number: pr.number,
        draft: pr.pull.draft,
        url: `${emu.url}/${OWNER}/${REPO}/pull/${pr.number}`,
        title: pr.title,
        head: pr.pull.head,
      };
    summary.comments = [
      ...emu.comments(issue).map((c) => ({ on: 'issue' as const, author: c.user, body: c.body })),
      ...(pr
        ? emu.comments(pr.number).map((c) => ({ on: 'pr' as const, author: c.user, body: c.body }))
        : []),
    ];
    const revised = !opts.revise || summary.revisions.some((r) => r.verdict === 'verified' && r.commit);
    const again = !opts.again || summary.again?.verdict === 'verified';
    summary.result =
      summary.verdict === 'verified' && summary.pr?.draft && revised && again ? 'success' : 'failure';
    if (summary.result === 'failure')
      summary.error = !revised
        ? `the revision was not published: ${JSON.stringify(summary.revisions)}`
        : !again && summary.verdict === 'verified'
          ? `the second issue's run ended with verdict ${summary.again?.verdict}`
          : (run.error ?? `run ended ${run.state} with verdict ${run.verdict}`);
    if (opts.serve) Object.assign(summary, pageOf(run.id));
  } catch (err) {
    summary.error = (err as Error).message;
  }
  try {
    await opts.serve?.(summary);
  } finally {
    await app.close();
    await scripted?.close();
    await emu.close();
    rmSync(work, { recursive: true, force: true });
  }
  return summary;
}

type SavedCounts = { passed?: number; failed?: number; errors?: number } | null | undefined;

/** Reads one of the run's own JSON records (result.json, report.json); null when it was not written. */
function readJson<T>(file: string): T | null {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : null;
}

function counts(c: SavedCounts): Counts | null {
  return c && typeof c.passed === 'number'
    ? { passed: c.passed, failed: (c.failed ?? 0) + (c.errors ?? 0) }
    : null;
}
