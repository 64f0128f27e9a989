import {
  parseRepoConfig,
  REPO_CONFIG_MAX_BYTES,
  REPO_CONFIG_PATH,
  type OperatorLimits,
  type RepoConfigResult,
} from './repo-config.js';

/** Reading a file of the repository at a commit through GitHub's contents API, size-checked first. */

/**
 * The two reads of GitHub's API that fetching a file takes, as the installation client offers them
 * (named here so that settings stay below the stages that hold a client).
 */
export interface ContentsReader {
  rest: {
    repos: {
      getContent(p: { owner: string; repo: string; path: string; ref: string }): Promise<{ data: unknown }>;
    };
    git: {
      getBlob(p: { owner: string; repo: string; file_sha: string }): Promise<{
        data: { size?: number | null; encoding?: string; content?: string };
      }>;
    };
  };
}

/** Why a file of `size` bytes is not read. */
export const overSize = (path: string, size: number, maxBytes: number) =>
  `\`${path}\` has ${size} bytes, over the ${maxBytes}-byte limit; nothing was read.`;

export type FileResult = { ok: true; text: string | null } | { ok: false; error: string };

/**
 * A file's text at `ref` (null when it does not exist), refused by the contents API's `size` before
 * anything is decoded when it is over `maxBytes`. The contents API leaves files over 1 MB out
 * (`encoding: "none"`); those are read through the git blob API.
 */
export async function fetchFile(
  gh: ContentsReader,
  owner: string,
  repo: string,
  path: string,
  ref: string,
  maxBytes: number,
): Promise<FileResult> {
  const tooBig = (size: number): FileResult => ({ ok: false, error: overSize(path, size, maxBytes) });
  try {
    const { data } = (await gh.rest.repos.getContent({ owner, repo, path, ref })) as {
      data: { type?: string; size?: number; sha?: string; content?: string; encoding?: string };
    };
    if (data.type !== 'file') return { ok: true, text: null };
    if (!(typeof data.size === 'number' && data.size <= maxBytes)) return tooBig(data.size ?? NaN);
    let b64 = data.encoding === 'base64' ? data.content : undefined;
    if (data.encoding === 'none' && data.sha) {
      const blob = await gh.rest.git.getBlob({ owner, repo, file_sha: data.sha });
      const size = blob.data.size ?? NaN;
      if (!(size <= maxBytes)) return tooBig(size);
      if (blob.data.encoding === 'base64') b64 = blob.data.content;
    }
    if (b64 === undefined)
      return { ok: false, error: `\`${path}\` came back in an unexpected encoding (\`${data.encoding}\`).` };
    const buf = Buffer.from(b64, 'base64');
    return buf.length > maxBytes ? tooBig(buf.length) : { ok: true, text: buf.toString('utf8') };
  } catch (e) {
    const { status, message } = e as { status?: number; message?: string };
    if (status === 404) return { ok: true, text: null };
    // GitHub refuses files over 100 MB with 403; the issue is told, never a silent failure.
    const why = `${status ?? 'error'}: ${String(message ?? e)}`.slice(0, 300);
    return { ok: false, error: `\`${path}\` could not be read (${why}).` };
  }
}

export async function loadRepoConfig(
  gh: ContentsReader,
  owner: string,
  repo: string,
  ref: string,
  limits: OperatorLimits,
): Promise<RepoConfigResult> {
  const file = await configAt(gh, owner, repo, ref);
  return file.ok ? parseRepoConfig(file.text, limits) : { ok: false, error: file.error };
}

/**
 * The config file's text at a commit, read from GitHub once for a labelled run: intake reads it at the
 * commit the run is pinned to, and prepare reads it again there (issue 40). A full SHA names one tree,
 * so its text is the same whoever asks; kept a short while only, and a branch or tag name (whose
 * commit moves) or a read that failed is always asked again.
 */
async function configAt(gh: ContentsReader, owner: string, repo: string, ref: string): Promise<FileResult> {
  if (!/^[0-9a-f]{40}$/.test(ref))
    return fetchFile(gh, owner, repo, REPO_CONFIG_PATH, ref, REPO_CONFIG_MAX_BYTES);
  const key = `${owner.toLowerCase()}/${repo.toLowerCase()}@${ref}`;
  const now = Date.now();
  for (const [k, v] of recent) {
    if (v.until > now) break; // kept in the order they expire
    recent.delete(k);
  }
  const hit = recent.get(key);
  if (hit) return hit.file;
  const file = await fetchFile(gh, owner, repo, REPO_CONFIG_PATH, ref, REPO_CONFIG_MAX_BYTES);
  if (file.ok) {
    if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value!);
    recent.set(key, { file, until: now + RECENT_MS });
  }
  return file;
}

/** Long enough for a queued run to reach prepare; a file is at most 64 KB, so 256 of them stay small. */
const RECENT_MS = 10 * 60_000;
const RECENT_MAX = 256;
const recent = new Map<string, { file: FileResult; until: number }>();
