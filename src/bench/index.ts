/**
 * `npm run bench`: speed and size figures that tests must not time. Each benchmark is a module
 * returning named numbers; this prints them as one JSON object (and a readable table on stderr).
 * `--smoke` runs each at small sizes (CI runs that, so a benchmark cannot rot unnoticed).
 */
import type { BenchOptions } from './options.js';

type Bench = (o: BenchOptions) => Promise<Record<string, number | string>>;

const BENCHES: Record<string, () => Promise<Bench>> = {
  docker: async () => (await import('./docker.js')).benchDocker,
  'build-output': async () => (await import('./build-output.js')).benchBuildOutput,
  context: async () => (await import('./context.js')).benchContext,
  app: async () => (await import('./app.js')).benchApp,
  // The webhook part of `app` alone (no Docker demo).
  webhook: async () => (await import('./app.js')).benchWebhook,
  // The demo part of `app` alone: label-to-PR wall time cold and warm, and where the warm run's time goes.
  demo: async () => (await import('./demo-wall.js')).demoWallTime,
  // The distributed queue (Redis, PostgreSQL) without Docker.
  scale: async () => (await import('./scale.js')).benchScale,
  // Real jest, vitest and mocha suites: measured limits and the judge's cells under them.
  suites: async () => (await import('./suites.js')).benchSuites,
  // A Node project's environment on a cold engine with the recipe the model is offered (issue 40).
  env: async () => (await import('./env.js')).benchEnv,
  // A warm mirror's fetch (nothing new, one new commit): what the app adds around git.
  fetch: async () => (await import('./fetch.js')).benchFetch,
};

const PARTS = new Set(['webhook', 'demo']);

async function main(args: string[]): Promise<void> {
  const options: BenchOptions = { smoke: args.includes('--smoke') };
  // `--skip=a,b`: all but these (CI's smoke leaves out what a test already runs whole).
  const skipped = new Set(args.flatMap((a) => (a.startsWith('--skip=') ? a.slice(7).split(',') : [])));
  for (const name of skipped)
    if (!(name in BENCHES))
      throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
  const names = args.filter((a) => !a.startsWith('--'));
  // Parts of another benchmark run only when named: all of them at once would run them twice.
  const selected = (names.length ? names : Object.keys(BENCHES).filter((n) => !PARTS.has(n))).filter(
    (n) => !skipped.has(n),
  );
  const results: Record<string, Record<string, number | string>> = {};
  for (const name of selected) {
    const load = BENCHES[name];
    if (!load) throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHES).join(', ')}`);
    process.stderr.write(`bench ${name} ...\n`);
    const started = performance.now();
    results[name] = await (await load())(options);
    for (const [k, v] of Object.entries(results[name]!)) process.stderr.write(`  ${k.padEnd(40)} ${v}\n`);
    // What each benchmark costs (the smoke run is part of CI's time).
    process.stderr.write(`bench ${name} took ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  }
  process.stdout.write(JSON.stringify(results, null, 2) + '\n');
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`bench failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exitCode = 1;
});
