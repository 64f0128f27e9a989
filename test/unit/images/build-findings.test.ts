import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LocalSandbox } from '../../../src/environment/local.js';
import type { BuildResult, EnvironmentBuilder } from '../../../src/environment/types.js';
import { baseImages, describeBaseImage, NODE_REPO, runtimeImage } from '../../../src/images/base-images.js';
import { endOfLifeWarnings } from '../../../src/images/build-warnings.js';
import { BuildLogCompactor } from '../../../src/images/buildlog.js';
import { makeBuildEnvironmentTool } from '../../../src/tools/build-environment.js';
import { buildToolContext } from '../../support/build-context.js';

/** Issue 40, item 2: what a successful build's output still has to tell the model, and the images it is offered. */
const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-findings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What `apt-get install nodejs npm` gave on bookworm (npm 9, Node 18) for a current dev tool, as the trace showed it. */
const DEBIAN_NODE_BUILD = [
  'Step 1/10 : FROM agenticfix/debian:bookworm',
  'Step 4/10 : RUN npm pkg delete scripts && npm ci',
  ' ---> Running in 0123456789ab',
  'npm WARN EBADENGINE Unsupported engine {',
  "npm WARN EBADENGINE   package: 'minimatch@10.0.1',",
  "npm WARN EBADENGINE   required: { node: '20 || >=22' },",
  "npm WARN EBADENGINE   current: { node: 'v18.20.4', npm: '9.2.0' }",
  'npm WARN EBADENGINE }',
  'npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.',
  'added 300 packages in 40s',
];

describe("a successful build's findings", () => {
  const read = async (lines: string[]) => {
    const c = new BuildLogCompactor();
    for (const l of lines) c.write(`${l}\n`);
    return c.findings;
  };

  it('names npm EBADENGINE (npm 9 and 11 spellings), npm refusing its node, pnpm and yarn engine checks, once each', async () => {
    const npm11 = DEBIAN_NODE_BUILD.map((l) => l.replace('npm WARN', 'npm warn'));
    const f = await read([
      ...DEBIAN_NODE_BUILD,
      ...npm11,
      'npm WARN cli npm v10.9.0 does not support Node.js v16.20.2. This version of npm supports the following node versions: `^18.17.0 || >=20.5.0`.',
      ' WARN  Unsupported engine: wanted: {"node":">=20"} (current: {"node":"v18.20.4","pnpm":"9.1.0"})',
      'warning minimatch@10.0.1: The engine "node" is incompatible with this module. Expected version "20 || >=22". Got "18.20.4"',
    ]);
    expect(f.warnings()).toEqual([
      "npm EBADENGINE: minimatch@10.0.1 requires { node: '20 || >=22' }, the image has { node: 'v18.20.4', npm: '9.2.0' }",
      'npm WARN cli npm v10.9.0 does not support Node.js v16.20.2. This version of npm supports the following node versions: `^18.17.0 || >=20.5.0`.',
      'WARN  Unsupported engine: wanted: {"node":">=20"} (current: {"node":"v18.20.4","pnpm":"9.1.0"})',
      'warning minimatch@10.0.1: The engine "node" is incompatible with this module. Expected version "20 || >=22". Got "18.20.4"',
    ]);
  });

  it('stays bounded whatever the build prints', async () => {
    const many = Array.from({ length: 50 }, (_, i) => [
      'npm warn EBADENGINE Unsupported engine {',
      `npm warn EBADENGINE   package: 'p${i}@1.0.0',`,
      "npm warn EBADENGINE   required: { node: '>=99' },",
      "npm warn EBADENGINE   current: { node: 'v22.23.5', npm: '11.19.1' }",
      'npm warn EBADENGINE }',
    ]).flat();
    const w = (await read(many)).warnings();
    expect(w).toHaveLength(11);
    expect(w[10]).toBe('… 40 more warnings left out');
  });

  it("says which of the Dockerfile's steps the layer cache answered, not the engine's own LABEL steps", async () => {
    const f = await read([
      'Step 1/8 : FROM agenticfix/node:22',
      'Step 2/8 : WORKDIR /deps',
      ' ---> Using cache',
      ' ---> 1111111111aa',
      'Step 3/8 : COPY package.json package-lock.json ./',
      ' ---> Using cache',
      'Step 4/8 : RUN npm ci',
      ' ---> Running in 2222222222bb',
      'Step 5/8 : LABEL agenticfix=1',
      ' ---> Using cache',
    ]);
    expect(f.cachedSteps((total) => total - 4)).toEqual([2, 3]);
  });

  it('names a runtime past its end of life (Debian bookworm: Node.js 18), not a supported one', () => {
    const now = new Date('2026-12-06T00:00:00Z');
    expect(endOfLifeWarnings({ 'node --version': 'v18.20.4', 'npm --version': '9.2.0' }, now)).toEqual([
      'Node.js 18.20.4 is past its end of life (2025-04-30): current tools refuse it; start FROM a local language image with a supported Node.js',
    ]);
    expect(
      endOfLifeWarnings({ 'node --version': 'v22.23.5', 'python3 --version': 'Python 3.11.2' }, now),
    ).toEqual([]);
    expect(endOfLifeWarnings({ 'python3 --version': 'Python 3.7.3' }, now)).toEqual([
      'Python 3.7.3 is past its end of life (before 2024-10-07): current tools refuse it; start FROM a local language image with a supported Python',
    ]);
    expect(endOfLifeWarnings({ 'node --version': 'v20.19.0' }, new Date('2026-01-01'))).toEqual([]);
    expect(endOfLifeWarnings({ 'go version': 'not found' }, now)).toEqual([]);
  });
});

describe('the base images the model is offered', () => {
  it('lists the language images first, by their short tag, with the version; other hosts images are left out', () => {
    const images = baseImages(
      [
        { RepoTags: ['agenticfix/debian:bookworm'] },
        { RepoTags: ['agenticfix/python:3.11.2', 'agenticfix/python:3.11'] },
        { RepoTags: ['agenticfix-env:0123abcd', 'other/thing:1'] },
        { RepoTags: ['agenticfix/node:22', 'agenticfix/node:22.23.5'] },
        { RepoTags: ['agenticfix/node:24.1.0', 'agenticfix/node:24'] },
        { RepoTags: null },
      ],
      (t) => t.startsWith('agenticfix/'),
    );
    expect(images.map(describeBaseImage)).toEqual([
      'agenticfix/node:24 (Node.js 24.1.0; also agenticfix/node:24.1.0)',
      'agenticfix/node:22 (Node.js 22.23.5; also agenticfix/node:22.23.5)',
      'agenticfix/python:3.11 (Python 3.11.2; also agenticfix/python:3.11.2)',
      'agenticfix/debian:bookworm',
    ]);
    expect(runtimeImage(images, NODE_REPO)?.tag).toBe('agenticfix/node:24');
    expect(runtimeImage(images.slice(2), NODE_REPO)).toBeNull();
  });
});

describe("build_environment's reply", () => {
  it('leads with the warnings of a successful build', async () => {
    const result: BuildResult = {
      success: true,
      image_id: 'sha256:1',
      image_tag: null,
      cache_hit: false,
      duration_ms: 1,
      network: { proxy: false, ca: false },
      log: { exit_status: 'ok', head: [], tail: [], error_lines: [], total_lines: 0, truncated: false },
      warnings: [
        "npm EBADENGINE: minimatch@10.0.1 requires { node: '20 || >=22' }, the image has { node: 'v18.20.4' }",
      ],
      cached_steps: [2, 3, 4],
      error: null,
    };
    const builder: EnvironmentBuilder = {
      build: async () => result,
      sandboxFor: () => new LocalSandbox(),
      runSandboxFor: () => new LocalSandbox(),
      localBaseImages: async () => [],
    };
    const ctx = buildToolContext({
      runId: 'findings',
      worktree: dir,
      parent: dir,
      builder,
      testCommand: ['go', 'test'],
    });
    const reply = await makeBuildEnvironmentTool().run(ctx, { dockerfile: 'FROM x\n' });
    expect(reply).toMatchObject({ success: true });
    const data = (reply as { data: Record<string, unknown> }).data;
    expect(Object.keys(data)[0]).toBe('warnings');
    expect(data.warnings).toEqual(result.warnings);
    expect(data.cached_steps).toEqual([2, 3, 4]);
  });
});
