import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { execa } from 'execa';
import { loadConfig } from '../../../src/config/config.js';
import { nodeRecipe } from '../../../src/environment/node.js';
import { NODE_REPO, runtimeImage } from '../../../src/images/base-images.js';
import { DockerEnvironmentBuilder } from '../../../src/images/builder.js';
import { makeBuildEnvironmentTool } from '../../../src/tools/build-environment.js';
import { buildToolContext } from '../../support/build-context.js';
import { machineCa } from '../../support/ca.js';
import { BASE_IMAGE, needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/**
 * Issue 40, item 2: language images without apt. scripts/setup-docker.sh (run by .ci/run) builds them;
 * the Node recipe the model is offered starts FROM the Node.js image and installs from the lockfile first,
 * so a second build with the same lockfile takes the installed layer from the engine's cache.
 */
const engine = await needDocker();
const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-lang-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inspect = (ref: string) => execa('docker', ['image', 'inspect', ref, '--format', '{{.Id}}']);
const run = async (image: string, ...argv: string[]) =>
  (await execa('docker', ['run', '--rm', '--network', 'none', image, ...argv])).stdout.trim();

describeIf(engine)('language images', () => {
  const docker = new Docker();
  const runId = `test-lang-${process.pid}-${Date.now()}`;
  const base = loadConfig({ AGENTICFIX_BASE_IMAGE: BASE_IMAGE }, dir).sandbox;
  const sandboxCfg = { ...base, buildNetwork: { ...base.buildNetwork, caFile: machineCa(dir) ?? undefined } };
  const builder = new DockerEnvironmentBuilder(docker, sandboxCfg);
  afterAll(() => builder.release(runId));

  it('are present, tagged by runtime and version, and named first with the version', async () => {
    const node = await run('agenticfix/node:22', 'node', '--version');
    expect(node).toMatch(/^v22\.\d+\.\d+$/);
    expect((await inspect(`agenticfix/node:${node.slice(1)}`)).stdout).toBe(
      (await inspect('agenticfix/node:22')).stdout,
    );
    const python = (await run('agenticfix/python:3.11', 'python3', '--version')).replace('Python ', '');
    expect(python).toMatch(/^3\.11\.\d+$/);
    expect((await inspect(`agenticfix/python:${python}`)).stdout).toBe(
      (await inspect('agenticfix/python:3.11')).stdout,
    );
    expect(await run('agenticfix/python:3.11', 'python3', '-m', 'pytest', '--version')).toMatch(/^pytest /);

    const listed = await builder.localBaseImages();
    expect(listed.slice(0, 2)).toEqual([
      `agenticfix/node:22 (Node.js ${node.slice(1)}; also agenticfix/node:${node.slice(1)})`,
      `agenticfix/python:3.11 (Python ${python}; also agenticfix/python:${python})`,
    ]);
    expect(listed).toContain(BASE_IMAGE);
  });

  it('the Node recipe builds with no apt, names EBADENGINE in the reply, and reuses the installed layer for the same lockfile', async () => {
    const repo = mkdtempSync(path.join(dir, 'repo-'));
    // The root package asks for a Node.js that does not exist: npm ci warns EBADENGINE and goes on. The run id
    // makes the lockfile's layer new to this engine.
    const pkg = { name: 'engines', version: '1.0.0', description: runId, engines: { node: '>=99' } };
    const lock = (p: typeof pkg) => ({
      name: p.name,
      version: p.version,
      lockfileVersion: 3,
      requires: true,
      packages: { '': { name: p.name, version: p.version, engines: p.engines } },
    });
    const write = (p: typeof pkg, source: string) => {
      writeFileSync(path.join(repo, 'package.json'), JSON.stringify(p));
      writeFileSync(path.join(repo, 'package-lock.json'), JSON.stringify(lock(p)));
      writeFileSync(path.join(repo, 'index.js'), source);
    };
    write(pkg, 'module.exports = 1;\n');
    const nodeImage = runtimeImage(await builder.baseImages(), NODE_REPO);
    expect(nodeImage?.tag).toBe('agenticfix/node:22');
    const dockerfile = [...nodeRecipe(repo, { nodeImage, baseImage: BASE_IMAGE })!, ''].join('\n');
    expect(dockerfile).not.toMatch(/apt-get/);
    const install = dockerfile.split('\n').findIndex((l) => l.startsWith('RUN npm pkg delete scripts')) + 1;
    expect(install).toBe(4);

    const ctx = buildToolContext({
      runId,
      worktree: repo,
      parent: dir,
      builder,
      testCommand: ['node', '--test'],
    });
    const tool = makeBuildEnvironmentTool();
    const first = await tool.run(ctx, { dockerfile });
    expect(JSON.stringify(first).slice(0, 3000)).toMatch(/"success":true/);
    expect(first).toMatchObject({ success: true, data: { cache_hit: false } });
    const data = (first as { data: Record<string, unknown> }).data;
    // What matters leads: the package that refuses the image's runtime, with both versions.
    expect(Object.keys(data)[0]).toBe('warnings');
    expect(data.warnings).toEqual([
      `npm EBADENGINE: engines@1.0.0 requires { node: '>=99' }, the image has { node: '${(data.runtime as Record<string, string>)['node --version']}', npm: '${(data.runtime as Record<string, string>)['npm --version']}' }`,
    ]);
    expect(data.cached_steps ?? []).not.toContain(install);

    // Another commit, the same lockfile: the same environment (its key covers the files the Dockerfile copies).
    write(pkg, 'module.exports = 2;\n');
    const again = await builder.build({ dockerfile, worktree: repo, runId });
    expect(again).toMatchObject({ success: true, cache_hit: true, image_id: data.image_id });
    // A Dockerfile that differs after the install: a new image whose install step is the cached layer.
    const more = `${dockerfile}ENV CI=1\n`;
    const second = await builder.build({ dockerfile: more, worktree: repo, runId });
    expect(second).toMatchObject({ success: true, cache_hit: false });
    expect(second.cached_steps).toEqual(expect.arrayContaining([2, 3, install]));
    expect(second.cached_steps).not.toContain(7);

    // A changed lockfile installs again.
    write({ ...pkg, version: '1.0.1' }, 'module.exports = 3;\n');
    const third = await builder.build({ dockerfile: more, worktree: repo, runId });
    expect(third).toMatchObject({ success: true, cache_hit: false });
    expect(third.cached_steps).not.toContain(install);
  }, 300_000);
});
