import path from 'node:path';
import { stripUserinfo } from './git.js';

/** A URL or scp-like `user@host:path`; anything else is a local path. */
export const isUrl = (remote: string) =>
  /^[a-z][a-z0-9+.-]*:\/\//i.test(remote) || /^[^/\\]+@[^/\\:]+:/.test(remote);

/** One mirror per repository, whatever spelling of the remote (credentials, trailing slash or `.git`). */
export function normalizeRemote(remote: string): string {
  if (!isUrl(remote))
    return path
      .resolve(remote)
      .replace(/\/+$/, '')
      .replace(/\.git$/, '');
  const stripped = stripUserinfo(remote)
    .replace(/\/+$/, '')
    .replace(/\.git$/, '');
  return stripped.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/]+)/i, (_, scheme: string, host: string) => {
    return scheme.toLowerCase() + host.toLowerCase();
  });
}
