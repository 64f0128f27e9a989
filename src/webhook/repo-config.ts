import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { GitHub } from '../publish/github.js';

/** Per-repository settings from `.github/agenticfix.yml` (at the run's base commit). */

export const REPO_CONFIG_PATH = '.github/agenticfix.yml';
export const DEFAULT_TEST_ARGV = ['python3', '-m', 'pytest', '-q'];

/** Paths (repo-relative, `/`-separated, no `..`): a file or a directory prefix. */
const repoPath = z
  .string()
  .min(1)
  .refine(
    (p) => !p.startsWith('/') && !p.split('/').includes('..'),
    'must be relative and inside the repository',
  );

const REPO_CONFIG_SCHEMA = z.strictObject({
  label: z.string().min(1).max(50).optional(), // default: the app's configured label
  test: z.array(z.string().min(1)).min(1).default(DEFAULT_TEST_ARGV),
  dockerfile: repoPath.optional(), // maintainer Dockerfile used instead of asking the model
  model: z.string().min(1).max(100).optional(),
  budgets: z
    .strictObject({
      tokens: z.number().int().positive().optional(),
      requests: z.number().int().positive().optional(),
      tool_calls: z.number().int().positive().optional(),
      time_s: z.number().int().positive().optional(),
    })
    .default({}),
  protected_paths: z.array(repoPath).default([]),
  publish_unverified: z.boolean().default(false),
});

export type RepoConfig = z.infer<typeof REPO_CONFIG_SCHEMA>;

export type RepoConfigResult = { ok: true; config: RepoConfig } | { ok: false; error: string };

/** Parses the file's text; `null` (no file) gives the defaults. */
export function parseRepoConfig(text: string | null): RepoConfigResult {
  let raw: unknown = {};
  if (text !== null) {
    try {
      raw = parseYaml(text) ?? {};
    } catch (e) {
      return { ok: false, error: `${REPO_CONFIG_PATH} is not valid YAML: ${(e as Error).message}` };
    }
  }
  const parsed = REPO_CONFIG_SCHEMA.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `- \`${i.path.join('.') || '(root)'}\`: ${i.message}`);
    return { ok: false, error: `${REPO_CONFIG_PATH} is invalid:\n${lines.join('\n')}` };
  }
  return { ok: true, config: parsed.data };
}

/** A file's text at `ref`, or null when it does not exist. */
export async function fetchFile(
  gh: GitHub,
  owner: string,
  repo: string,
  path: string,
  ref: string,
): Promise<string | null> {
  try {
    const res = await gh.rest.repos.getContent({ owner, repo, path, ref });
    const data = res.data as { type?: string; content?: string; encoding?: string };
    if (data.type !== 'file' || typeof data.content !== 'string') return null;
    return Buffer.from(data.content, (data.encoding as BufferEncoding) ?? 'base64').toString('utf8');
  } catch (e) {
    if ((e as { status?: number }).status === 404) return null;
    throw e;
  }
}

export async function loadRepoConfig(
  gh: GitHub,
  owner: string,
  repo: string,
  ref: string,
): Promise<RepoConfigResult> {
  return parseRepoConfig(await fetchFile(gh, owner, repo, REPO_CONFIG_PATH, ref));
}
