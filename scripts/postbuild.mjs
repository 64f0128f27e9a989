// After tsc: makes the CLI entry executable (npm links bin files but tsc drops the mode); records the
// commit the build is of (src/config/version.ts): GIT_COMMIT (the image's build argument, its context
// has no .git), else git's HEAD, else unknown; and stamps the build's time
// (test/support/global-setup.mjs rebuilds only when a source is newer).
import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';

chmodSync(new URL('../dist/cli/index.js', import.meta.url), 0o755);
let commit = process.env.GIT_COMMIT?.trim().slice(0, 12) || 'unknown';
if (commit === 'unknown')
  try {
    commit = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: new URL('..', import.meta.url),
      encoding: 'utf8',
      stdio: 'pipe',
    }).trim();
  } catch {
    // not a git checkout
  }
writeFileSync(new URL('../dist/build-info.json', import.meta.url), JSON.stringify({ commit }) + '\n');
writeFileSync(new URL('../dist/.built', import.meta.url), `${new Date().toISOString()}\n`);
