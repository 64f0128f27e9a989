import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compose } from '../../src/cli/compose.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import type { Parts } from '../../src/verify/types.js';

/** The settings `agenticfix demo` runs under: its home and runs inside the directory it runs in. */
export const DEMO_ENV = { AGENTICFIX_HOME: '.af', AGENTICFIX_RUNS_DIR: 'runs' };

/** A demo's config in a fresh directory (named after `prefix`) and the parts composed from it. */
export function demoSetup(prefix: string): Parts & { config: Config } {
  const config = loadConfig(DEMO_ENV, mkdtempSync(path.join(tmpdir(), prefix)));
  return { ...compose(config), config };
}
