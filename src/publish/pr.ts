import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { capStderr, git, type GitConfig } from '../workspace/git.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import { applyPatch } from '../patch/patch.js';
import { Redactor } from '../trace/redact.js';
import { isGone, type GitHub } from './github.js';
import { readMarker, unmarked, withMarker } from '../trace/marker.js';
import { fitBody } from './render.js';

/** Pushing a verified patch to `agenticfix/issue-<n>` and opening or updating its draft pull request. */

export const branchFor = (issue: number): string => `agenticfix/issue-${issue}`;
/** The name a run's branch gets when `branch` is taken. */
export const runBranch = (branch: string, runId: string): string => `${branch}-${runId}`;

/** `stale`: the lease refused the push (git's "stale info"): the branch exists (create) or is not at `from`. */
export type PushResult = { ok: true; commit: string } | { ok: false; error: string; stale?: true };

interface Where {
  workspaces: GitWorkspaceManager;
  cloneUrl: string;
  runId: string;
}

export interface PushOptions extends Where {
  gh: GitHub;
  baseCommit: string;
  patch: string;
  /** The branch wanted; when it exists, `<branch>-<run id>` instead. */
  branch: string;
  message: string;
  /** The commit made already (commitOnto with these options, while the judge ran). */
  made?: Promise<Commit>;
  /** Told once git pushes: what may run beside the push starts then. */
  pushing?: () => void;
}

/**
 * Commits the patch on the base commit and pushes it to a branch that does not exist yet: `branch`, or
 * `<branch>-<run id>` when an earlier run's branch (with a maintainer's commits, revisions) holds the
 * name. The push only creates, so a commit the app did not make in this run is never replaced; its own
 * answer says when a name is taken, so no separate look at the branches goes before it.
 */
export async function pushPatch(
  o: PushOptions,
): Promise<{ ok: true; commit: string; branch: string } | { ok: false; error: string }> {
  const made = await (o.made ?? commitOnto({ ...o, parent: o.baseCommit, diffFrom: o.baseCommit }));
  if (!made.ok) return made;
  const names = [o.branch, runBranch(o.branch, o.runId)];
  for (const branch of names) {
    const pushed = await pushCommit({ ...o, commit: made.commit, branch, mode: 'create' });
    if (pushed.ok) return { ...pushed, branch };
    if (!pushed.stale) return { ok: false, error: pushed.error };
  }
  return { ok: false, error: `the branches ${names.join(' and ')} exist already` };
}

export type Commit = { ok: true; commit: string; diff: string } | { ok: false; error: string };

/**
 * Commits `patch` on `parent` and returns the commit with its diff from `diffFrom` (a revision's
 * cumulative change against the original base). Made in the mirror through a scratch index, with no
 * checkout: the commit object stays there, so pushCommit can push it later.
 */
export async function commitOnto(
  o: Where & { parent: string; patch: string; message: string; diffFrom: string },
): Promise<Commit> {
  const mirror = await o.workspaces.mirror(o.cloneUrl, [], o.parent); // fetches only when `parent` is missing
  const scratch = await mkdtemp(path.join(tmpdir(), 'agenticfix-commit-'));
  const indexFile = path.join(scratch, 'index');
  const inMirror = async (args: string[]) =>
    (await git(args, { cwd: mirror, env: { GIT_DIR: mirror, GIT_INDEX_FILE: indexFile } })).stdout.trim();
  try {
    await inMirror(['read-tree', o.parent]);
    const applied = await applyPatch({ gitDir: mirror, indexFile }, o.patch);
    if (!applied.ok) return { ok: false, error: `the patch does not apply: ${applied.error}` };
    const tree = await inMirror(['write-tree']);
    const commit = await inMirror(['commit-tree', tree, '-p', o.parent, '-m', o.message]);
    const diff = (
      await git(['diff', '--binary', o.diffFrom, commit], { cwd: mirror, env: { GIT_DIR: mirror } })
    ).stdout;
    return { ok: true, commit, diff };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Pushes `commit` to the branch, leased on what the branch must hold (`--force-with-lease`): `create`,
 * only when the branch does not exist; `{ from }`, only while it is at `from` (the commit's parent: a
 * fast-forward), so a branch that moved is never overwritten and one deleted meanwhile is never made
 * again (its pull request was closed with it). Nobody's commit is ever dropped. The installation token reaches git
 * only as a per-call `http.extraHeader` in the environment of the network calls: nothing is written to
 * any config file, and it never appears in the process list.
 */
export async function pushCommit(
  o: Where & {
    gh: GitHub;
    commit: string;
    branch: string;
    mode: 'create' | { from: string };
    pushing?: () => void;
  },
): Promise<PushResult> {
  // The commit is already in the mirror (commitOnto made it there): git pushes from the mirror itself,
  // with no worktree to check out.
  const mirror = o.workspaces.mirrorPath(o.cloneUrl);
  const { token } = (await o.gh.auth({ type: 'installation' })) as { token: string };
  const ref = `refs/heads/${o.branch}`;
  const lease = `--force-with-lease=${ref}:${o.mode === 'create' ? '' : o.mode.from}`;
  const pushing = authGit(['push', '--porcelain', lease, o.cloneUrl, `${o.commit}:${ref}`], mirror, token);
  o.pushing?.(); // git has started (authGit spawns it at once)
  const pushed = await pushing;
  if (pushed.ok) return { ok: true, commit: o.commit };
  // git checks the lease against the refs the remote advertised and refuses before sending anything.
  const stale = pushed.stdout.includes(`:${ref}\t[rejected] (stale info)`);
  return { ok: false, error: pushed.error, ...(stale ? { stale } : {}) };
}

/** Per-call git config that authenticates HTTPS git with an installation token. */
export function tokenAuth(token: string): GitConfig {
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return [['http.extraHeader', `Authorization: Basic ${basic}`]];
}

/** Runs a network git command in the mirror with the token as a per-call header; errors never carry the token. */
async function authGit(
  args: string[],
  mirror: string,
  token: string,
): Promise<{ ok: true; stdout: string } | { ok: false; error: string; stdout: string }> {
  const auth = tokenAuth(token);
  const redactor = new Redactor([token, ...auth.map(([, v]) => v.replace('Authorization: Basic ', ''))]);
  try {
    const res = await git(args, { cwd: mirror, env: { GIT_DIR: mirror }, allowFail: true, config: auth });
    if (res.exitCode === 0) return { ok: true, stdout: res.stdout };
    return {
      ok: false,
      error: `git ${args[0]} failed (exit ${res.exitCode}): ${capStderr(redactor.text(res.stderr))}`,
      stdout: res.stdout,
    };
  } catch (e) {
    return { ok: false, error: redactor.text(e instanceof Error ? e.message : String(e)), stdout: '' };
  }
}

/** The branch's head commit, or null when GitHub has no such branch (404). */
export async function branchHead(
  gh: GitHub,
  a: { owner: string; repo: string; branch: string },
): Promise<string | null> {
  try {
    return (await gh.rest.repos.getBranch(a)).data.commit.sha;
  } catch (e) {
    if (isGone(e)) return null;
    throw e;
  }
}

/**
 * Opens the draft PR for the branch, or updates the open one (reruns push to the same branch). A branch
 * `fresh`ly created by this run's push has no pull request open: it is opened without a look first.
 */
export async function upsertDraftPr(
  gh: GitHub,
  a: {
    owner: string;
    repo: string;
    branch: string;
    base: string;
    title: string;
    body: string;
    fresh?: boolean;
  },
  retried = false,
): Promise<{ number: number; url: string; created: boolean }> {
  const existing =
    a.fresh && !retried
      ? undefined
      : (
          await gh.rest.pulls.list({
            owner: a.owner,
            repo: a.repo,
            state: 'open',
            head: `${a.owner}:${a.branch}`,
          })
        ).data.find((p) => p.head.ref === a.branch);
  if (existing) {
    const res = await gh.rest.pulls.update({
      owner: a.owner,
      repo: a.repo,
      pull_number: existing.number,
      title: a.title,
      body: a.body,
    });
    return { number: res.data.number, url: res.data.html_url, created: false };
  }
  try {
    const res = await gh.rest.pulls.create({
      owner: a.owner,
      repo: a.repo,
      head: a.branch,
      base: a.base,
      title: a.title,
      body: a.body,
      draft: true,
    });
    return { number: res.data.number, url: res.data.html_url, created: true };
  } catch (e) {
    // Opened since the list (GitHub's 422 "A pull request already exists"): that one is updated, once.
    const err = e as { status?: number; message?: string };
    if (retried || err.status !== 422 || !/already exists/i.test(err.message ?? '')) throw e;
    return upsertDraftPr(gh, a, true);
  }
}

const SECTION_OPEN = '<!-- agenticfix:revisions -->';
const SECTION_CLOSE = '<!-- /agenticfix:revisions -->';

/**
 * `body` with `section` between the app's markers: the marked part is replaced, or appended when there is
 * none, so whatever else a maintainer wrote in the description stays as it is.
 */
export function withSection(body: string, section: string): string {
  const marked = `${SECTION_OPEN}\n${section}\n${SECTION_CLOSE}`;
  const open = body.indexOf(SECTION_OPEN);
  const close = body.indexOf(SECTION_CLOSE, open);
  if (open >= 0 && close >= 0) return body.slice(0, open) + marked + body.slice(close + SECTION_CLOSE.length);
  // The app's write marker stays last.
  const mark = readMarker(body);
  const text = `${unmarked(body).trimEnd()}\n\n${marked}`;
  return mark ? withMarker(text, mark) : text;
}

/** Rewrites the app's section of a pull request's description, reading the description just before. */
export async function updatePrSection(
  gh: GitHub,
  a: { owner: string; repo: string; pull_number: number; section: string },
): Promise<void> {
  const { data } = await gh.rest.pulls.get({ owner: a.owner, repo: a.repo, pull_number: a.pull_number });
  await gh.rest.pulls.update({
    owner: a.owner,
    repo: a.repo,
    pull_number: a.pull_number,
    body: fitBody(withSection(data.body ?? '', a.section)),
  });
}
