// The one place that says which jest project each test file belongs to (jest.config.js reads it). A file
// goes in the project of the heaviest thing it needs: services > docker > cli > app > unit. A test file in
// no project, in two, or listed but missing fails the jest run before any test starts.
import { readdirSync } from 'node:fs';
import path from 'node:path';

export const PROJECTS = {
  /** Pure: in-process logic, temp dirs and git at most; no listener, no engine, no dist/. */
  unit: [
    'agent-bench-context',
    'agent-loop',
    'agent-units',
    'attempts',
    'architecture',
    'build-findings',
    'buildlog',
    'commands',
    'compose',
    'config',
    'cost',
    'grading-units',
    'human-model',
    'observation',
    'patch',
    'reports',
    'revision-context',
    'runner-output',
    'runtime',
    'sandbox-local',
    'settings-doc',
    'stage',
    'store-patience',
    'suites',
    'summary',
    'test-results',
    'tools',
    'trace',
    'trees',
    'untrusted-render',
    'upkeep',
    'verify-cli',
    'verify-units',
    'version',
    'webhook-pacing',
    'workspace',
  ],
  /** The app in-process against the GitHub emulator and the scripted model (or a browser); no Docker. */
  app: [
    'app',
    'composition-root',
    'contract',
    'cost-app',
    'attempts-app',
    'docker-context',
    'emulator-github',
    'emulator-github-probot',
    'emulator-reviews',
    'faults-provider',
    'faults-publish',
    'late-writes',
    'github-failures',
    'model-limits',
    'publish',
    'repair',
    'repo-config',
    'revision',
    'scripted-model',
    'web',
    'web-browser',
    'webhook-intake',
    'worker-cli',
  ],
  /** Starts the built CLI (dist/, built once by test/support/global-setup.mjs); no Docker engine. */
  cli: ['agent-cli', 'operator-cli'],
  /** Needs the Docker engine (some also start dist/). */
  docker: [
    'build-ca',
    'build-network',
    'build-output',
    'container',
    'demo-app',
    'demo-attempts',
    'demo-revise',
    'demo-serve',
    'demo-tools',
    'disk-bounds',
    'docker',
    'e2e-app',
    'e2e-node',
    'e2e-revision',
    'environment-heal',
    'eval',
    'faults',
    'faults-engine',
    'image-leases',
    'isolation-git',
    'isolation-reads',
    'language-images',
    'leftovers',
    'node-runners',
    'observations-docker',
    'observe',
    'public-comments',
    'repair-docker',
    'runsc',
    'sandbox-corpus',
    'setup',
    'verify',
    'warm-sandbox',
  ],
  /** Needs Redis and/or PostgreSQL (some also Docker and dist/). */
  services: [
    'bench-smoke',
    'e2e-scale',
    'emulator-cli',
    'outage',
    'queue',
    'services',
    'store',
    'store-outage',
  ],
};

/** Test files (paths under test/, without `.test.ts`) found on disk. */
export function testFiles(dir) {
  return readdirSync(dir, { recursive: true })
    .map((f) => String(f).split(path.sep).join('/'))
    .filter((f) => f.endsWith('.test.ts') && !f.split('/').includes('fixtures'))
    .map((f) => f.slice(0, -'.test.ts'.length))
    .sort();
}

/** What is wrong with `projects` for `files`: each file in exactly one project, each listed file present. */
export function misassigned(projects, files) {
  const where = new Map(files.map((f) => [f, []]));
  const problems = [];
  for (const [name, listed] of Object.entries(projects))
    for (const f of listed) {
      if (!where.has(f)) problems.push(`test/${f}.test.ts is listed in ${name} but does not exist`);
      else where.get(f).push(name);
    }
  for (const [f, names] of where) {
    if (names.length === 0) problems.push(`test/${f}.test.ts is in no project (add it to test/projects.mjs)`);
    if (names.length > 1) problems.push(`test/${f}.test.ts is in more than one project: ${names.join(', ')}`);
  }
  return problems;
}
