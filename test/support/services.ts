import { missing, present, type Need } from './skip.js';

type Service = 'AGENTICFIX_TEST_REDIS_URL' | 'AGENTICFIX_TEST_DATABASE_URL';

/**
 * The URL of a service the distributed tests need (written by scripts/setup-services.sh), or null. In CI
 * an unset URL is a failure; elsewhere the tests that need it skip through `needService` (support/skip.ts).
 */
export function serviceUrl(name: Service): URL | null {
  const value = process.env[name];
  if (value) return new URL(value);
  missing(name, 'unset (run scripts/setup-services.sh and source its env file)');
  return null;
}

/** The service behind `name`, for `describeIf`/`itIf`. */
export function needService(name: Service): Need {
  return serviceUrl(name)
    ? present(name)
    : missing(name, 'unset (run scripts/setup-services.sh and source its env file)');
}
