import { loadRepoConfig } from '../config/repo-file.js';
import type { GitHub } from '../publish/github.js';
import { tokenAuth } from '../publish/pr.js';
import { collapsed } from '../publish/render.js';
import type { RunRecord, RunUpdate } from '../store/store.js';
import { capMiddle } from '../trace/cap.js';
import { publishExtra, recordedAttempts } from './attempts.js';
import type { Services } from './context.js';
import { openPr } from './open-pr.js';
import { resumeRevision } from './push-revision.js';
import { message, nextTry, pendingFields, PUBLISH_ATTEMPTS, readPending } from './pending.js';
import { refOf } from './reporter.js';

/**
 * Publishes a run that waits to (`publish_pending`) when its next try is due, from what its record
 * keeps (any process that serves the store can): a first run's pull request, or a revision's push and
 * comments (push-revision.ts). After PUBLISH_ATTEMPTS the run fails and the issue
 * gets the patch; `ended` is told of a run that ends that way.
 */
export async function republish(
  s: Services,
  run: RunRecord,
  auth: (installationId: number) => Promise<GitHub>,
  ended: (run: RunRecord) => void,
): Promise<void> {
  const { config, store, reporter } = s;
  const read = readPending(run);
  if (read.ok && Date.parse(read.pending.next_at) > Date.now()) return;
  const gh = await auth(run.installation_id);
  const ref = refOf(run);
  const end = (fields: RunUpdate) =>
    store.update(run.id, { finished_at: new Date().toISOString(), publish: null, ...fields });
  if (!read.ok) return void (await end({ state: 'failed', error: read.error }));
  const { pending, result } = read;
  const loaded = await loadRepoConfig(gh, run.owner, run.repo, run.base_commit, config);
  if (!loaded.ok) return void (await end({ state: 'failed', error: loaded.error }));
  try {
    // This machine's mirror may lack the base commit (another one ran the run): fetched with the token.
    const { token } = (await gh.auth({ type: 'installation' })) as { token: string };
    await s.workspaces.mirror(pending.remote, tokenAuth(token), run.base_commit);
    const c = {
      s,
      run,
      gh,
      ref,
      status: reporter.status(run),
      rc: loaded.config,
      remote: pending.remote,
      defaultBranch: pending.default_branch,
      dockerfile: pending.dockerfile ?? undefined,
      issueTitle: run.issue_title ?? '',
      budgets: pending.budgets,
      model: pending.model_label,
      signal: new AbortController().signal,
      resumed: true,
    };
    const attempts = recordedAttempts(run);
    const extra = attempts.length > 0 ? publishExtra(c, attempts) : undefined;
    const fields = pending.revision
      ? await resumeRevision(c, result, pending.report, pending.revision)
      : await openPr(c, result, pending.report, extra);
    await end({ error: null, ...fields });
    reporter.release(run);
  } catch (e) {
    const error = capMiddle(`publishing failed: ${message(e)}`);
    const attempts = pending.attempts + 1;
    if (attempts <= PUBLISH_ATTEMPTS) {
      const next = { ...pending, attempts, next_at: nextTry(attempts, config.app.publishRetryBaseMs) };
      await store.update(run.id, { ...pendingFields(next), error });
      return;
    }
    // The run's patch stays in its run directory (on the machine that ran it); the issue is told, with the patch attached.
    await reporter.tell(
      run,
      gh,
      ref,
      'publishing-failed',
      `## AgenticFix: publishing failed\n\n${error}\n\nThe patch is kept with the run (\`${result.patch_path}\`).\n\n${collapsed('Candidate patch', result.patch, 50_000, 'diff')}`,
      true,
    );
    ended(await end({ state: 'failed', error }));
  }
}
