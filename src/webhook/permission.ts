import type { GitHub } from '../publish/github.js';
import type { USER } from './payloads.js';
import type { z } from 'zod';

const WRITE_ROLES = new Set(['admin', 'maintain', 'write']);

/** Answers per installation client: a client serves one delivery, so its sender is looked up once. */
const permissions = new WeakMap<GitHub, Map<string, Promise<boolean>>>();

/** Whether `username` may write to the repository (a writer may start, rerun, revise and cancel runs). */
export function canWrite(gh: GitHub, owner: string, repo: string, username: string): Promise<boolean> {
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

export const isBot = (u: z.infer<typeof USER>): boolean => u.type === 'Bot' || u.login.endsWith('[bot]');

export const politeNo = (login: string, what: string) =>
  `Thanks, @${login}! Only people with write access to this repository can ${what}, so nothing was started. A maintainer can do it for you.`;
