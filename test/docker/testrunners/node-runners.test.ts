import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config/config.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { nodeRecipe, nodeSetupNote } from '../../../src/environment/node.js';
import { runCell } from '../../../src/verify/cells.js';
import { gradeInstance, TaskSchema } from '../../../src/verify/task.js';
import { gradeRow } from '../../../src/verify/test-ids.js';
import { git } from '../../../src/workspace/git.js';
import { machineCa } from '../../support/ca.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';
import { nodeDockerfile, nodeFixtureRepo, RUNNER_ARGV } from '../../support/node.js';
import { compose } from '../../../src/cli/compose.js';

const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-node-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Node projects: the setup the model is told', () => {
  it('follows the lockfile (npm, pnpm, yarn; none: npm install) and is only given for Node projects', async () => {
    const { writeFileSync, mkdirSync } = await import('node:fs');
    const project = (files: string[]) => {
      const p = mkdtempSync(path.join(dir, 'p-'));
      for (const f of files) writeFileSync(path.join(p, f), '{}');
      return p;
    };
    const runtime = {
      nodeImage: { tag: 'agenticfix/node:22', runtime: 'Node.js 22.23.5' },
      baseImage: BASE_IMAGE,
    };
    // Issue 40: FROM the local Node.js image, no apt; the manifest and lockfile installed before anything else.
    expect(nodeRecipe(project(['package.json', 'package-lock.json']), runtime)).toEqual([
      'FROM agenticfix/node:22',
      'WORKDIR /deps',
      'COPY package.json package-lock.json ./',
      'RUN npm pkg delete scripts && npm ci && mkdir -p node_modules && ln -s /deps/node_modules /node_modules && ln -s /tmp /deps/node_modules/.vite-temp',
      'ENV PATH=/deps/node_modules/.bin:$PATH',
      'WORKDIR /workspace',
    ]);
    expect(nodeRecipe(project(['package.json', 'pnpm-lock.yaml']), runtime)).toContain(
      'RUN npm pkg delete scripts && npm install -g pnpm && pnpm install --frozen-lockfile && mkdir -p node_modules && ln -s /deps/node_modules /node_modules && ln -s /tmp /deps/node_modules/.vite-temp',
    );
    expect(nodeRecipe(project(['package.json', 'yarn.lock']), runtime)).toContain(
      'COPY package.json yarn.lock ./',
    );
    expect(nodeRecipe(project(['package.json']), runtime)).toContain(
      'RUN npm pkg delete scripts && npm install && mkdir -p node_modules && ln -s /deps/node_modules /node_modules && ln -s /tmp /deps/node_modules/.vite-temp',
    );
    const note = nodeSetupNote(project(['package.json', 'package-lock.json']), runtime)!;
    expect(note).toContain(
      'a Dockerfile like this one (agenticfix/node:22 has Node.js 22.23.5 and npm, so node needs no apt;',
    );
    expect(note).toContain('    FROM agenticfix/node:22\n    WORKDIR /deps\n');
    expect(note).not.toContain('apt-get install');
    // Without the language image (setup-docker.sh not run): Debian's node on the base image, and said so.
    const withoutImage = nodeRecipe(project(['package.json']), { nodeImage: null, baseImage: BASE_IMAGE });
    expect(withoutImage!.slice(0, 2)).toEqual([
      `FROM ${BASE_IMAGE}`,
      'RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*',
    ]);
    expect(nodeSetupNote(project(['setup.py']), runtime)).toBeNull();
    // A link planted as package.json is not followed (the worktree is untrusted).
    const linked = project([]);
    mkdirSync(path.join(linked, 'real'));
    writeFileSync(path.join(linked, 'real/package.json'), '{}');
    (await import('node:fs')).symlinkSync('real/package.json', path.join(linked, 'package.json'));
    expect(nodeSetupNote(linked, runtime)).toBeNull();
  });
});

const engine = await needDocker();
const d = describeIf(engine);

d('jest, vitest and mocha for real, installed from the npm registry at build time', () => {
  const runId = `test-node-${process.pid}-${Date.now()}`;
  const docker = new Docker();
  const base = loadConfig({ AGENTICFIX_BASE_IMAGE: BASE_IMAGE }, dir).sandbox;
  // On a machine whose egress re-signs TLS the CA is what lets npm in; elsewhere nothing is needed.
  const sandboxCfg = { ...base, buildNetwork: { ...base.buildNetwork, caFile: machineCa(dir) ?? undefined } };
  const builder = new DockerEnvironmentBuilder(docker, sandboxCfg);
  afterAll(() => builder.release(runId));

  it("vite's temp dir is writable on the read-only root, and what is written there resolves packages", async () => {
    const repo = await nodeFixtureRepo(dir);
    const built = await builder.build({ dockerfile: nodeDockerfile(BASE_IMAGE), worktree: repo, runId });
    expect(built).toMatchObject({ success: true });
    // What vite 6 does with a config file: bundle it into the nearest node_modules' .vite-temp, then import it.
    // Without the link: "ENOENT: no such file or directory, mkdir '/node_modules/.vite-temp'".
    const script = [
      "const fs = require('fs');",
      "fs.mkdirSync('/node_modules/.vite-temp', { recursive: true });",
      "fs.writeFileSync('/node_modules/.vite-temp/c.mjs', \"import { defineConfig } from 'vitest/config'; export default typeof defineConfig;\");",
      "import('/node_modules/.vite-temp/c.mjs').then((m) => console.log('loaded', m.default));",
    ].join('\n');
    const run = await builder.sandboxFor(built.image_id!, runId).run({
      argv: ['node', '-e', script],
      worktree: repo,
      timeoutMs: 60_000,
      maxOutputBytes: 1 << 16,
    });
    expect({ stdout: run.stdout.trim(), stderr: run.stderr }).toEqual({
      stdout: 'loaded function',
      stderr: '',
    });
  }, 600_000);

  it('per-test ids from each runner, the same on every run, also when the command asks for its own report', async () => {
    const repo = await nodeFixtureRepo(dir);
    const built = await builder.build({ dockerfile: nodeDockerfile(BASE_IMAGE), worktree: repo, runId });
    expect(built).toMatchObject({ success: true });
    const sandbox = builder.sandboxFor(built.image_id!, runId);
    const cell = (argv: readonly string[]) =>
      runCell(
        { name: 'base', source: 'base', tests: 'base' },
        {
          sandbox,
          worktree: repo,
          argv,
          timeoutMs: 120_000,
          maxOutputBytes: 1 << 20,
          maxReportBytes: 1 << 20,
          reruns: 1,
          allowEmpty: false,
        },
      );
    const ids = {
      jest: 'test/jest/slug.test.js > slugify > ',
      vitest: 'test/vitest/slug.test.mjs > slugify > ',
      mocha: 'test/mocha/slug.spec.js > slugify ',
    };
    // What a task row may already carry (SWE-bench-style rows do): the judge replaces it with its own.
    const ownReport = {
      jest: ['--json', '--outputFile=row.json'],
      vitest: ['--reporter=json', '--outputFile=row.json'],
      mocha: ['--reporter', 'json', '--reporter-option', 'output=row.json'],
    };
    for (const [runner, argv] of Object.entries(RUNNER_ARGV) as [keyof typeof ids, readonly string[]][]) {
      const first = await cell(argv);
      const second = await cell([...argv, ...ownReport[runner]]);
      expect({ runner, source: first.report_source, per_test: first.per_test }).toEqual({
        runner,
        source: `${runner}-json`,
        per_test: true,
      });
      const statuses = Object.fromEntries(first.results.map((r) => [r.id, r.status]));
      expect(statuses).toEqual({
        [`${ids[runner]}lower-cases words`]: 'passed',
        [`${ids[runner]}joins runs of symbols with one dash`]: 'passed',
        [`${ids[runner]}drops trailing punctuation`]: 'failed',
      });
      expect(second.results.map((r) => r.id)).toEqual(first.results.map((r) => r.id));

      // A row names the same tests in any runner's naming: the same verdict from every form.
      const [file, describe] = ids[runner].split(' > ');
      const forms = [
        (t: string) => `${ids[runner]}${t}`, // the judge's own
        (t: string) => `${file}::${describe!.trim()} ${t}`, // SWE-bench-style rows
        (t: string) => `${describe!.trim()} ${t}`, // jest fullName, vitest's and mocha's full title
        (t: string) => `${describe!.trim()} > ${t}`,
      ];
      const grades = forms.map((form) =>
        gradeRow(
          [form('drops trailing punctuation')],
          [form('lower-cases words'), form('joins runs of symbols with one dash')],
          first,
        ),
      );
      for (const g of grades)
        expect({
          runner,
          verdict: g.verdict,
          f2p: g.grade.FAIL_TO_PASS.failure.length,
          p2p: g.grade.PASS_TO_PASS.success.length,
        }).toEqual({
          runner,
          verdict: 'no_reproduction',
          f2p: 1,
          p2p: 2,
        });
      // An id the report does not hold is missing, named, never failing; a missing FAIL_TO_PASS cannot be graded.
      const gone = `${file}::${describe!.trim()} keeps emoji`;
      const p2pGone = gradeRow([forms[1]!('drops trailing punctuation')], [gone], first);
      expect(p2pGone.grade.PASS_TO_PASS).toEqual({ success: [], failure: [], missing: [gone] });
      expect(p2pGone.reason).toContain(`${gone} (not in the report)`);
      const f2pGone = gradeRow([gone], [], first);
      expect({ verdict: f2pGone.verdict, reason: f2pGone.reason }).toEqual({
        verdict: 'invalid_test_run',
        reason: `The test run cannot grade the row: 1 FAIL_TO_PASS test(s) are missing from the report: ${gone} (not in the report).`,
      });
    }
  }, 600_000);

  it("grades a row whose command redirects the runner's report with the shell (`> file`)", async () => {
    const repo = await nodeFixtureRepo(dir);
    const fixed = readFileSync(path.join(repo, 'slug.js'), 'utf8').replace(
      ".replace(/^-/, '')",
      ".replace(/^-|-$/g, '')",
    );
    expect(fixed).not.toBe(readFileSync(path.join(repo, 'slug.js'), 'utf8'));
    writeFileSync(path.join(repo, 'slug.js'), fixed);
    const gold = (await git(['diff'], { cwd: repo })).stdout;
    await git(['checkout', '--', '.'], { cwd: repo });
    const config = { ...loadConfig({ AGENTICFIX_HOME: path.join(dir, 'home') }, dir), sandbox: sandboxCfg };
    const task = TaskSchema.parse({
      instance_id: 'slugger-1',
      repo,
      base_commit: 'HEAD',
      problem_statement: 'trailing dash',
      test_patch: '',
      FAIL_TO_PASS: ['test/mocha/slug.spec.js::slugify drops trailing punctuation'],
      PASS_TO_PASS: ['slugify lower-cases words', 'slugify joins runs of symbols with one dash'],
      test_command: 'mocha test/mocha --reporter json > test-results.json',
      dockerfile: nodeDockerfile(BASE_IMAGE),
    });
    const r = await gradeInstance(task, gold, config, {
      ...compose(config),
      outDir: path.join(dir, 'graded'),
    });
    // It was "No test files found" (`>` and the file name reached mocha as arguments): invalid_test_run.
    expect({ verdict: r.verdict, reason: r.reason }).toEqual({
      verdict: 'verified',
      reason: 'Resolved: all 1 FAIL_TO_PASS and 2 PASS_TO_PASS tests pass.',
    });
    expect(r.cells[0]!.argv.slice(0, 2)).toEqual(['sh', '-c']);
  }, 600_000);
});
