/**
 * The URL of a service the distributed tests need (written by scripts/setup-services.sh). In CI an
 * unset URL is a failure, never a silent skip; elsewhere the suite is skipped with a loud warning.
 */
export function serviceUrl(name: 'AGENTICFIX_TEST_REDIS_URL' | 'AGENTICFIX_TEST_DATABASE_URL'): URL | null {
  const value = process.env[name];
  if (value) return new URL(value);
  if (process.env.CI)
    throw new Error(`${name} required in CI (run scripts/setup-services.sh and source its env file)`);
  console.warn(`\n!!! ${name} unset: SKIPPING tests that need it (see scripts/setup-services.sh) !!!\n`);
  return null;
}
