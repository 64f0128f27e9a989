import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const HOST_CAS = '/usr/local/share/ca-certificates';

/**
 * The extra CAs this machine trusts (its egress re-signs TLS with one; see the README's build network),
 * written as one bundle into `dir`: what AGENTICFIX_BUILD_CA_FILE names on such a machine. Null where there
 * is none, as on a machine with direct access to the registries: the same tests then run without a CA.
 */
export function machineCa(dir: string): string | null {
  const files = existsSync(HOST_CAS) ? readdirSync(HOST_CAS).filter((f) => f.endsWith('.crt')) : [];
  if (files.length === 0) return null;
  const bundle = path.join(dir, 'machine-ca.crt');
  writeFileSync(bundle, files.map((f) => readFileSync(path.join(HOST_CAS, f), 'utf8')).join('\n'));
  return bundle;
}
