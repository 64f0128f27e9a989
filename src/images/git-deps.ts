import path from 'node:path';
import { readRegularFile } from '../workspace/safe-read.js';

/** npm's words for a dependency it had to fetch with git (`github:`, `git+https:`…). */
const GIT_FETCH =
  /syscall spawn git|spawn git ENOENT|An unknown git error occurred|\bgit (?:--no-replace-objects )?ls-remote\b/;
/** A dependency spec npm fetches from a git host, not from the registry. */
const GIT_SPEC =
  /^(?:github:|gitlab:|bitbucket:|gist:|git\+|git:\/\/|https?:\/\/\S+\.git(?:#\S*)?$|[\w.-]+\/[\w.-]+(?:#\S*)?$)/;
const GIT_URL = /\b(?:git\+)?(?:ssh|https?|git):\/\/\S+?\.git\b/g;
const FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies'] as const;

/** The package.json's dependencies whose spec is a git location, as `name (spec)`. */
function gitDependencies(worktree: string): string[] {
  const read = readRegularFile(path.join(worktree, 'package.json'), 1 << 20);
  if (!read.ok) return [];
  let pkg: unknown;
  try {
    pkg = JSON.parse(read.buf.toString('utf8'));
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const field of FIELDS) {
    const deps = (pkg as Record<string, unknown> | null)?.[field];
    if (!deps || typeof deps !== 'object') continue;
    for (const [name, spec] of Object.entries(deps))
      if (typeof spec === 'string' && GIT_SPEC.test(spec)) out.push(`${name} (${spec})`);
  }
  return out;
}

/**
 * For a build that failed fetching a dependency with git: which dependency, and that builds reach only
 * package registries. Null when the log shows no such failure.
 */
export function gitDependencyHint(log: readonly string[], worktree: string): string | null {
  if (!log.some((l) => GIT_FETCH.test(l))) return null;
  const named = gitDependencies(worktree);
  const urls = [...new Set(log.flatMap((l) => l.match(GIT_URL) ?? []))];
  const which = [...named, ...urls].slice(0, 5).join(', ') || 'a dependency';
  return (
    `npm had to fetch ${which} with git: builds reach only package registries (npm, PyPI, Debian), not git ` +
    'hosts. Use a version published on the registry, or vendor the code into the repository.'
  );
}
