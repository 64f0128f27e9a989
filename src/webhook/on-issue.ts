import type { z } from 'zod';
import { loadRepoConfig } from '../config/repo-file.js';
import type { GitHub } from '../publish/github.js';
import { headOf, replyTo, start, type Delivery } from './delivery.js';
import type { INSTALLED, INSTALLED_REPOS, LABELED } from './payloads.js';
import { canWrite, politeNo } from './permission.js';

/** A writer's trigger label on an issue starts a run pinned to the default branch's head. */
export async function onLabeled(d: Delivery<z.infer<typeof LABELED>>): Promise<void> {
  const { repository: r, sender, issue, label, installation } = d.payload;
  const { config } = d.deps;
  const owner = r.owner.login;
  const ref = { owner, repo: r.name, issue: issue.number };
  // The repository's config (which may rename the trigger label) is read only for a sender who may
  // start a run: nobody else's label event costs more than this one permission check.
  if (!(await canWrite(d.gh, owner, r.name, sender.login))) {
    if (label?.name === config.app.label)
      await replyTo(d, ref, sender.login, politeNo(sender.login, 'start AgenticFix'));
    return;
  }
  const base = await headOf(d.gh, owner, r.name, r.default_branch);
  // An unreadable or invalid config falls back to the default label; the job then reports the error
  // on the issue.
  const rc = await loadRepoConfig(d.gh, owner, r.name, base, config);
  if (label?.name !== ((rc.ok && rc.config.label) || config.app.label)) return;
  await start(d, {
    ...ref,
    installation_id: installation.id,
    trigger: 'label',
    triggered_by: sender.login,
    base_commit: base,
    issue_title: issue.title,
    issue_body: issue.body ?? '',
    issue_updated_at: issue.updated_at,
  });
}

/**
 * The app installed (or given more repositories): each gets the trigger label when it lacks it, so
 * maintainers find it in the label list. One repository refusing (archived, say) stops no other.
 */
export async function onInstalled(
  d: Delivery<z.infer<typeof INSTALLED> | z.infer<typeof INSTALLED_REPOS>>,
): Promise<void> {
  const p = d.payload;
  const repos = 'repositories_added' in p ? p.repositories_added : (p.repositories ?? []);
  for (const { full_name } of repos) {
    const [owner = '', repo = ''] = full_name.split('/');
    await ensureLabel(d.gh, owner, repo, d.deps.config.app.label).catch((err: unknown) =>
      d.log.warn({ err, repository: full_name }, 'could not create the trigger label'),
    );
  }
}

/** Creates label `name` in the repository unless it is there (GitHub matches label names case-insensitively). */
async function ensureLabel(gh: GitHub, owner: string, repo: string, name: string): Promise<void> {
  const found = await gh.rest.issues.getLabel({ owner, repo, name }).then(
    () => true,
    (e: { status?: number }) => (e.status === 404 ? false : Promise.reject(e)),
  );
  if (found) return;
  await gh.rest.issues
    .createLabel({
      owner,
      repo,
      name,
      color: '5319e7',
      description: 'AgenticFix: a maintainer adds it to have the app fix the issue',
    })
    // Made meanwhile (another delivery, a person): what was wanted.
    .catch((e: { status?: number; response?: { data?: { errors?: { code?: string }[] } } }) => {
      if (e.status !== 422 || !e.response?.data?.errors?.some((x) => x.code === 'already_exists')) throw e;
    });
}
