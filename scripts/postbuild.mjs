// Makes the CLI entry executable after tsc (npm links bin files but tsc drops the mode), and stamps the
// build's time (test/support/global-setup.mjs rebuilds only when a source is newer).
import { chmodSync, writeFileSync } from 'node:fs';
chmodSync(new URL('../dist/cli/index.js', import.meta.url), 0o755);
writeFileSync(new URL('../dist/.built', import.meta.url), `${new Date().toISOString()}\n`);
