import type { z } from 'zod';
import { commandRefusal } from '../config/repo-config.js';
import type { IssueRef } from '../publish/github.js';
import { revisionAsker } from '../publish/render.js';
import type { RunRecord } from '../store/store.js';
import { parseCommand, USAGE, type Command } from './commands.js';
import { headOf, replyTo, start, type Delivery } from './delivery.js';
import { admitted, startRevision } from './on-pull.js';
import type { COMMENTED } from './payloads.js';
import { canWrite, politeNo } from './permission.js';

type Commented = Delivery<z.infer<typeof COMMENTED>>;

/** A `/agenticfix` command on an issue, or on the app's pull request (where it is about the issue it fixes). */
export async function onComment(d: Commented): Promise<void> {
  const { repository: r, sender, comment, issue } = d.payload;
  const { store } = d.deps;
  const parsed = parseCommand(comment.body);
  if (parsed.type === 'none') return;
  const owner = r.owner.login;
  const issueNumber = issue.pull_request ? await store.issueForPr(owner, r.name, issue.number) : issue.number;
  if (issueNumber === null) return; // someone else's pull request
  const reply = (body: string) =>
    replyTo(d, { owner, repo: r.name, issue: issue.number }, sender.login, body);
  if (parsed.type === 'invalid')
    return void (await reply(`Sorry, I did not understand that: ${parsed.reason}.\n\n${USAGE}`));
  const writer = await canWrite(d.gh, owner, r.name, sender.login);
  // 👀 only for a writer's command: anyone else's gets at most the rate-limited reply, never a write
  // of its own per comment.
  if (writer)
    await d.gh.rest.reactions.createForIssueComment({
      owner,
      repo: r.name,
      comment_id: comment.id,
      content: 'eyes',
    });
  const { command } = parsed;
  if (command.kind === 'revise') {
    if (!writer) return void (await reply(politeNo(sender.login, 'revise this pull request')));
    if (!issue.pull_request)
      return void (await reply(
        '`/agenticfix revise` works on the pull request AgenticFix opened, not on the issue.',
      ));
    const t = await admitted(d, { owner, repo: r.name, pr: issue.number, trigger: 'revise' }, reply);
    if (t) await startRevision(d, t, { kind: 'command', user: sender.login, text: command.text });
    return;
  }
  await runCommand(d, command, { owner, repo: r.name, issue: issueNumber }, writer, reply);
}

async function runCommand(
  d: Commented,
  command: Exclude<Command, { kind: 'revise' }>,
  ref: IssueRef,
  writer: boolean,
  reply: (body: string) => Promise<unknown>,
): Promise<void> {
  const { store, queue, config } = d.deps;
  const login = d.payload.sender.login;
  switch (command.kind) {
    case 'help':
      return void (await reply(USAGE));
    case 'status':
      return void (await reply(statusReply(await store.forIssue(ref.owner, ref.repo, ref.issue))));
    case 'cancel': {
      if (!writer) return void (await reply(politeNo(login, 'cancel a run')));
      const run = await queue.cancel(ref.owner, ref.repo, ref.issue, login);
      if (!run) await reply('There is no queued or running AgenticFix run for this issue.');
      return;
    }
    case 'rerun': {
      if (!writer) return void (await reply(politeNo(login, 'rerun AgenticFix')));
      const refused = commandRefusal(config, command);
      if (refused) return void (await reply(`${refused}; nothing started.`));
      // The issue as it reads now, when a maintainer asked for the run.
      const [base, { data: snapshot }] = await Promise.all([
        headOf(d.gh, ref.owner, ref.repo, d.payload.repository.default_branch),
        d.gh.rest.issues.get({ owner: ref.owner, repo: ref.repo, issue_number: ref.issue }),
      ]);
      await start(d, {
        ...ref,
        installation_id: d.payload.installation.id,
        trigger: 'rerun',
        triggered_by: login,
        base_commit: base,
        model: command.model ?? null,
        token_budget: command.budget ?? null,
        attempts_asked: command.attempts ?? null,
        issue_title: snapshot.title,
        issue_body: snapshot.body ?? '',
        issue_updated_at: snapshot.updated_at,
      });
      return;
    }
  }
}

/** The latest run, then the revisions of the pull request the latest run on the issue opened. */
function statusReply(runs: RunRecord[]): string {
  const [run] = runs; // newest first
  if (!run) return 'AgenticFix has not run on this issue yet.';
  const origin = runs.findIndex((r) => r.revision === null);
  const revisions = runs.slice(0, origin < 0 ? runs.length : origin).reverse();
  const latest = latestLine(origin < 0 ? run : runs[origin]!);
  if (revisions.length === 0) return latest;
  const lines = revisions.map(
    (r) =>
      `- Revision ${r.revision} (\`${r.id}\`, by ${revisionAsker(r)}, from \`${(r.head_commit ?? '').slice(0, 12)}\`): state \`${r.state}\`` +
      (r.verdict ? `, verdict \`${r.verdict}\`` : '') +
      (r.pushed_commit ? `, pushed ${r.pushed_commit}` : ', nothing pushed'),
  );
  return `${latest}\n\nRevisions of pull request #${revisions[0]!.pr_number}:\n${lines.join('\n')}`;
}

function latestLine(run: RunRecord): string {
  const facts = [
    `state \`${run.state}\``,
    run.verdict && `verdict \`${run.verdict}\``,
    run.stop_reason && `stop reason \`${run.stop_reason}\``,
    run.tokens !== null && `${run.tokens} tokens`,
    run.pr_number !== null && `pull request #${run.pr_number}`,
  ].filter(Boolean);
  return `Latest AgenticFix run \`${run.id}\` (${run.trigger} by @${run.triggered_by}, base \`${run.base_commit.slice(0, 12)}\`): ${facts.join(', ')}.`;
}
