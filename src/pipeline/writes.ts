import type { Logger } from 'probot';
import { editComment, isRefusal, postComment, type GitHub } from '../publish/github.js';
import type { RunStore } from '../store/store.js';
import { nextTry, PUBLISH_ATTEMPTS } from './pending.js';

/**
 * GitHub writes that are never dropped (a run's final status edit, its final comments): one GitHub
 * failed is kept in the run store (RunStore.queueWrite) and made here when due, by whichever process
 * serves the store.
 */

/** The id under which a run's final status edit is kept (a newer one replaces it). */
export const statusWrite = (run: { id: string }): string => `${run.id}:status`;

/**
 * Makes the kept writes that are due: tried with the back-off of publishing, without end; one GitHub
 * refuses for good (the comment deleted, the issue locked, the app uninstalled: a 4xx that is no rate
 * limit) is dropped and logged.
 */
export async function deliverDue(o: {
  store: RunStore;
  auth(installationId: number): Promise<GitHub>;
  retryBaseMs: number;
  log?: Pick<Logger, 'error'>;
}): Promise<void> {
  const { store } = o;
  for (const w of await store.dueWrites(new Date().toISOString())) {
    let posted: number | null = null;
    try {
      const gh = await o.auth(w.installation_id);
      if (w.comment_id !== null) await editComment(gh, w, w.comment_id, w.body);
      else posted = await postComment(gh, w, w.body, { look: true }); // its POST may have landed
    } catch (e) {
      if (isRefusal(e)) {
        o.log?.error({ err: e, run: w.run_id }, 'GitHub refused a kept write: it is dropped');
        await store.removeWrite(w.id);
      } else {
        await store.deferWrite(w.id, nextTry(Math.min(w.attempts + 2, PUBLISH_ATTEMPTS), o.retryBaseMs));
      }
      continue;
    }
    await store.removeWrite(w.id);
    if (posted === null) continue;
    if (w.id === statusWrite({ id: w.run_id })) await store.update(w.run_id, { status_comment_id: posted });
    else await store.addComment(w.run_id, posted);
  }
}
