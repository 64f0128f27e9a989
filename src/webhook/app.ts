import type { Probot } from 'probot';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { postComment, type GitHub, type IssueRef } from '../publish/github.js';
import type { RunQueue } from '../queue/queue.js';
import type { NewRun, RunRecord, RunStore } from '../queue/store.js';
import { parseCommand, USAGE, type Command } from './commands.js';
import type { Intake } from './intake.js';
import { commandRefusal, loadRepoConfig } from './repo-config.js';

/**
 * Webhook handlers. The server records each delivery the app may act on (once: a redelivered or
 * replayed webhook never acts twice) and answers before anything else; then a handler validates the
 * payload and hands it to the intake. The intake checks permission, pins the base commit and enqueues;
 * the work itself happens in the queue. A delivery stays recorded with its payload until its intake is
 * done, so one acknowledged just before a crash is taken in at the next start.
 */

export interface AppDeps {
  config: Config;
  store: RunStore;
  queue: RunQueue;
  intake: Intake;
}

/** The installation client for a delivery's installation (from the webhook context, or after a restart). */
type Auth = (installationId: number) => Promise<GitHub>;

const USER = z.object({ login: z.string(), type: z.string() });
const COMMON = {
  repository: z.object({
    name: z.string(),
    owner: z.object({ login: z.string() }),
    default_branch: z.string(),
  }),
  sender: USER,
  installation: z.object({ id: z.number().int() }),
};
const LABELED = z.object({
  ...COMMON,
  label: z.object({ name: z.string() }),
  // The issue as the maintainer labelled it: the run works on this snapshot, not on later edits.
  issue: z.object({
    number: z.number().int(),
    title: z.string(),
    body: z.string().nullish(),
    updated_at: z.string(),
  }),
});
const COMMENTED = z.object({
  ...COMMON,
  comment: z.object({ id: z.number().int(), body: z.string(), user: USER }),
  issue: z.object({ number: z.number().int(), pull_request: z.unknown().optional() }),
});

const isBot = (u: z.infer<typeof USER>): boolean => u.type === 'Bot' || u.login.endsWith('[bot]');

const WRITE_ROLES = new Set(['admin', 'maintain', 'write']);

/** The events (and their one action) the app acts on; every other delivery is answered and dropped. */
const HANDLED: Record<string, string> = { issues: 'labeled', issue_comment: 'created' };

/**
 * Whether a delivery is one the app may act on, read from its raw body. GitHub puts `action` first, so
 * a look at the body's start answers without parsing it; any other layout is parsed.
 */
export function wanted(event: string, body: string): boolean {
  const action = Object.hasOwn(HANDLED, event) ? HANDLED[event] : undefined;
  if (!action) return false;
  const lead = /^\s*\{\s*"action"\s*:\s*"([a-z_]*)"/.exec(body.slice(0, 100));
  if (lead) return lead[1] === action;
  try {
    return (JSON.parse(body) as { action?: unknown }).action === action;
  } catch {
    return false;
  }
}

/** Answers per installation client: a client serves one delivery, so its sender is looked up once. */
const permissions = new WeakMap<GitHub, Map<string, Promise<boolean>>>();

function canWrite(gh: GitHub, owner: string, repo: string, username: string): Promise<boolean> {
  let known = permissions.get(gh);
  if (!known) permissions.set(gh, (known = new Map()));
  const key = `${owner}/${repo}/${username}`;
  let answer = known.get(key);
  if (!answer) known.set(key, (answer = lookUpWrite(gh, owner, repo, username)));
  return answer;
}

/** write, maintain or admin on the repository (role_name is exact; `permission` folds maintain into write). */
async function lookUpWrite(gh: GitHub, owner: string, repo: string, username: string): Promise<boolean> {
  try {
    const { data } = await gh.rest.repos.getCollaboratorPermissionLevel({ owner, repo, username });
    const role = (data as { role_name?: string }).role_name;
    return WRITE_ROLES.has(role ?? '') || WRITE_ROLES.has(data.permission);
  } catch (e) {
    if ((e as { status?: number }).status === 404) return false;
    throw e;
  }
}

const politeNo = (login: string, what: string) =>
  `Thanks, @${login}! Only people with write access to this repository can ${what}, so nothing was started. A maintainer can do it for you.`;

export function createApp(deps: AppDeps) {
  const { config, store, queue, intake } = deps;

  /** The default branch's head right now: the commit a run is pinned to. */
  async function headOf(gh: GitHub, owner: string, repo: string, branch: string): Promise<string> {
    const { data } = await gh.rest.repos.getBranch({ owner, repo, branch });
    return data.commit.sha;
  }

  /**
   * Answers `login` on an issue. People without write access get at most one reply per issue per
   * AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S (counted in the store, so a restart does not reset it): their
   * commands cannot make the app flood an issue.
   */
  async function replyTo(gh: GitHub, ref: IssueRef, login: string, body: string): Promise<void> {
    const writer = await canWrite(gh, ref.owner, ref.repo, login);
    if (
      !writer &&
      !(await store.claimOutsiderReply(ref.owner, ref.repo, ref.issue, config.app.outsiderReplyIntervalMs))
    )
      return;
    await postComment(gh, ref, body);
  }

  async function start(run: Omit<NewRun, 'delivery_id'>, deliveryId: string): Promise<RunRecord> {
    const created = await store.createRun({ ...run, delivery_id: deliveryId });
    await queue.enqueue(created);
    return created;
  }

  async function onLabeled(id: string, gh: GitHub, d: z.infer<typeof LABELED>): Promise<void> {
    const { repository: r, sender, issue, label, installation } = d;
    const owner = r.owner.login;
    const ref = { owner, repo: r.name, issue: issue.number };
    // The repository's config (which may rename the trigger label) is read only for a sender who may
    // start a run: nobody else's label event costs more than this one permission check.
    if (!(await canWrite(gh, owner, r.name, sender.login))) {
      if (label.name === config.app.label)
        await replyTo(gh, ref, sender.login, politeNo(sender.login, 'start AgenticFix'));
      return;
    }
    const base = await headOf(gh, owner, r.name, r.default_branch);
    // An unreadable or invalid config falls back to the default label; the job then reports the error
    // on the issue.
    const rc = await loadRepoConfig(gh, owner, r.name, base, config);
    const wanted = (rc.ok && rc.config.label) || config.app.label;
    if (label.name !== wanted) return;
    await start(
      {
        ...ref,
        installation_id: installation.id,
        trigger: 'label',
        triggered_by: sender.login,
        base_commit: base,
        issue_title: issue.title,
        issue_body: issue.body ?? '',
        issue_updated_at: issue.updated_at,
      },
      id,
    );
  }

  async function onComment(id: string, gh: GitHub, d: z.infer<typeof COMMENTED>): Promise<void> {
    const { repository: r, sender, comment, issue, installation } = d;
    const parsed = parseCommand(comment.body);
    if (parsed.type === 'none') return;
    const owner = r.owner.login;
    // A command on the app's pull request is about the issue that PR fixes.
    const issueNumber = issue.pull_request
      ? await store.issueForPr(owner, r.name, issue.number)
      : issue.number;
    if (issueNumber === null) return; // someone else's pull request
    const reply = (body: string) =>
      replyTo(gh, { owner, repo: r.name, issue: issue.number }, sender.login, body);
    if (parsed.type === 'invalid')
      return void (await reply(`Sorry, I did not understand that: ${parsed.reason}.\n\n${USAGE}`));
    await gh.rest.reactions.createForIssueComment({
      owner,
      repo: r.name,
      comment_id: comment.id,
      content: 'eyes',
    });
    const ref = { owner, repo: r.name, issue: issueNumber };
    await runCommand(id, gh, parsed.command, ref, sender.login, installation.id, r.default_branch, reply);
  }

  /**
   * Validates a recorded delivery and hands it to the intake; one that asks nothing of the app (a bot, a
   * comment without a command, a payload of another shape) is marked done at once.
   */
  function receive(
    id: string,
    event: string,
    payload: unknown,
    auth: Auth,
    log: Probot['log'],
  ): Promise<void> {
    const ignore = async (why?: unknown) => {
      if (why) log.warn({ err: why, delivery: id, event }, 'unexpected payload');
      await store.finishDelivery(id);
    };
    if (event === 'issues') {
      const p = LABELED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      if (isBot(p.data.sender)) return ignore();
      return intake.run(id, async () => onLabeled(id, await auth(p.data.installation.id), p.data));
    } else {
      const p = COMMENTED.safeParse(payload);
      if (!p.success) return ignore(p.error);
      const { sender, comment } = p.data;
      if (isBot(sender) || isBot(comment.user) || parseCommand(comment.body).type === 'none') return ignore();
      return intake.run(id, async () => onComment(id, await auth(p.data.installation.id), p.data));
    }
  }

  return {
    /** The Probot app function: Probot routes each recorded delivery here after it was answered. */
    register(app: Probot): void {
      for (const [event, action] of Object.entries(HANDLED))
        app.on(`${event}.${action}` as 'issues.labeled', async (context) =>
          receive(context.id, event, context.payload, async () => context.octokit as GitHub, app.log),
        );
    },
    /** Takes in the deliveries a previous process acknowledged but did not finish. */
    async resume(auth: Auth, log: Probot['log']): Promise<number> {
      const pending = await store.pendingDeliveries();
      for (const d of pending)
        receive(d.id, d.event, d.payload, auth, log).catch((err: unknown) =>
          log.error({ err, delivery: d.id }, 'could not take in a delivery'),
        );
      return pending.length;
    },
  };

  async function runCommand(
    deliveryId: string,
    gh: GitHub,
    command: Command,
    ref: IssueRef,
    login: string,
    installationId: number,
    defaultBranch: string,
    reply: (body: string) => Promise<unknown>,
  ): Promise<void> {
    switch (command.kind) {
      case 'help':
        await reply(USAGE);
        return;
      case 'status':
        await reply(statusReply((await store.forIssue(ref.owner, ref.repo, ref.issue))[0] ?? null));
        return;
      case 'cancel': {
        if (!(await canWrite(gh, ref.owner, ref.repo, login)))
          return void (await reply(politeNo(login, 'cancel a run')));
        const run = await queue.cancel(ref.owner, ref.repo, ref.issue, login);
        if (!run) await reply('There is no queued or running AgenticFix run for this issue.');
        return;
      }
      case 'rerun': {
        if (!(await canWrite(gh, ref.owner, ref.repo, login)))
          return void (await reply(politeNo(login, 'rerun AgenticFix')));
        const refused = commandRefusal(config, command);
        if (refused) return void (await reply(`${refused}; nothing started.`));
        // The issue as it reads now, when a maintainer asked for the run.
        const [base, { data: snapshot }] = await Promise.all([
          headOf(gh, ref.owner, ref.repo, defaultBranch),
          gh.rest.issues.get({ owner: ref.owner, repo: ref.repo, issue_number: ref.issue }),
        ]);
        await start(
          {
            ...ref,
            installation_id: installationId,
            trigger: 'rerun',
            triggered_by: login,
            base_commit: base,
            model: command.model ?? null,
            token_budget: command.budget ?? null,
            issue_title: snapshot.title,
            issue_body: snapshot.body ?? '',
            issue_updated_at: snapshot.updated_at,
          },
          deliveryId,
        );
        return;
      }
    }
  }
}

function statusReply(run: RunRecord | null): string {
  if (!run) return 'AgenticFix has not run on this issue yet.';
  const facts = [
    `state \`${run.state}\``,
    run.verdict && `verdict \`${run.verdict}\``,
    run.stop_reason && `stop reason \`${run.stop_reason}\``,
    run.tokens !== null && `${run.tokens} tokens`,
    run.pr_number !== null && `pull request #${run.pr_number}`,
  ].filter(Boolean);
  return `Latest AgenticFix run \`${run.id}\` (${run.trigger} by @${run.triggered_by}, base \`${run.base_commit.slice(0, 12)}\`): ${facts.join(', ')}.`;
}
