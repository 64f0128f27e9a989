import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/**
 * The release this code is: package.json's version (the one place it is written), the commit it was
 * built from and the Node.js running it. `--version`, `agenticfix_build_info`, `/healthz`, the pull
 * requests' footers and the image's labels all show these.
 */
export interface BuildInfo {
  version: string;
  commit: string;
  node: string;
}

const PACKAGE = z.object({ version: z.string().regex(/^\d+\.\d+\.\d+(?:-[\w.-]+)?(?:\+[\w.-]+)?$/) });
/** Written by scripts/postbuild.mjs next to the built code (src/ has none: the commit is asked of git). */
const BUILT = z.strictObject({ commit: z.string().min(1) });

let cached: BuildInfo | null = null;

export function buildInfo(): BuildInfo {
  if (cached) return cached;
  // src/config/ and dist/config/ both sit two levels below package.json.
  const pkg = PACKAGE.parse(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')));
  cached = { version: pkg.version, commit: builtCommit(), node: process.version };
  return cached;
}

function builtCommit(): string {
  try {
    return BUILT.parse(JSON.parse(readFileSync(new URL('../build-info.json', import.meta.url), 'utf8')))
      .commit;
  } catch {
    try {
      const cwd = new URL('../..', import.meta.url);
      return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
        cwd,
        encoding: 'utf8',
        stdio: 'pipe',
      }).trim();
    } catch {
      return 'unknown';
    }
  }
}
