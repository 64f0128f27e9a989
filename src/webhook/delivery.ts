import type { Probot } from 'probot';
import type { Config } from '../config/config.js';
import { postComment, type GitHub, type IssueRef } from '../publish/github.js';
import type { RunQueue } from '../queue/queue.js';
import type { NewRun, RunRecord, RunStore } from '../store/store.js';
import { sha256 } from '../trace/trace.js';
import { canWrite } from './permission.js';

/** What the handlers may use: settings, the run store and the queue; nothing that runs the work. */
export interface HandlerDeps {
  config: Config;
  store: RunStore;
  queue: RunQueue;
}

/** One delivery being taken in, with its validated payload and its installation's client. */
export interface Delivery<P> {
  id: string;
  payload: P;
  gh: GitHub;
  log: Probot['log'];
  deps: HandlerDeps;
  /** Taken in again after a restart: what its first intake wrote may have landed unrecorded. */
  resumed?: boolean;
}

/**
 * A reply of the delivery, posted with its marker: the delivery and what the reply says (the same reply
 * twice is one), so a reply whose POST timed out but landed is not made again, nor one the process that
 * first took the delivery in made before it died.
 */
export const reply = (d: Delivery<unknown>, ref: IssueRef, body: string): Promise<number> =>
  postComment(d.gh, ref, body, {
    mark: { run: d.id, kind: `reply-${sha256(body).slice(0, 16)}` },
    look: d.resumed === true,
  });

/** Creates the delivery's run and enqueues it. */
export async function start(d: Delivery<unknown>, run: Omit<NewRun, 'delivery_id'>): Promise<RunRecord> {
  const created = await d.deps.store.createRun({ ...run, delivery_id: d.id });
  await d.deps.queue.enqueue(created);
  return created;
}

/** The default branch's head right now: the commit a run is pinned to. */
export async function headOf(gh: GitHub, owner: string, repo: string, branch: string): Promise<string> {
  const { data } = await gh.rest.repos.getBranch({ owner, repo, branch });
  return data.commit.sha;
}

/**
 * Answers `login` on an issue. People without write access get at most one reply per issue per
 * AGENTICFIX_OUTSIDER_REPLY_INTERVAL_S (counted in the store, so a restart does not reset it): their
 * commands cannot make the app flood an issue.
 */
export async function replyTo(
  d: Delivery<unknown>,
  ref: IssueRef,
  login: string,
  body: string,
): Promise<void> {
  const { store, config } = d.deps;
  const writer = await canWrite(d.gh, ref.owner, ref.repo, login);
  if (
    !writer &&
    !(await store.claimOutsiderReply(ref.owner, ref.repo, ref.issue, config.app.outsiderReplyIntervalMs))
  )
    return;
  await reply(d, ref, body);
}
