// Writes the settings and built-in prices tables of docs/configuration.md, .env.example and the JSON Schema of
// .github/agenticfix.yml (schema/agenticfix.schema.json, for editors) from the config schemas and
// src/config/prices.ts (run `npm run build` first);
// with --check, only says whether they are in sync (exit 1 when not).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { repoConfigJsonSchema } from '../dist/config/repo-config.js';
import { envExample, withPricesTable, withSettingsTable } from '../dist/config/settings-doc.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const files = {
  'docs/configuration.md': withPricesTable(
    withSettingsTable(readFileSync(`${root}docs/configuration.md`, 'utf8')),
  ),
  '.env.example': envExample(),
  'schema/agenticfix.schema.json': `${JSON.stringify(repoConfigJsonSchema(), null, 2)}\n`,
};
const stale = [];
for (const [name, text] of Object.entries(files)) {
  const current = existsSync(`${root}${name}`) ? readFileSync(`${root}${name}`, 'utf8') : null;
  if (current === text) continue;
  stale.push(name);
  if (process.argv.includes('--check')) continue;
  mkdirSync(`${root}${name}`.replace(/[^/]*$/, ''), { recursive: true });
  writeFileSync(`${root}${name}`, text);
}
if (process.argv.includes('--check') && stale.length > 0) {
  process.stderr.write(`out of date: ${stale.join(', ')} (run node scripts/settings-doc.mjs)\n`);
  process.exit(1);
}
