// Makes the CLI entry executable after tsc (npm links bin files but tsc drops the mode).
import { chmodSync } from 'node:fs';
chmodSync(new URL('../dist/cli/index.js', import.meta.url), 0o755);
