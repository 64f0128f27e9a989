import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import tar from 'tar-stream';
import {
  CONTEXT_DOCKERFILE,
  copiedSources,
  environmentKey,
  fromImages,
  packContext,
  snapshotWorktree,
} from '../src/environment/docker-context.js';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'pyproject-ok');

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-ctx-'));
  cpSync(FIXTURE, dir, { recursive: true });
  mkdirSync(path.join(dir, '.git'));
  writeFileSync(path.join(dir, '.git', 'config'), '[core]');
  mkdirSync(path.join(dir, 'node_modules', 'x'), { recursive: true });
  writeFileSync(path.join(dir, 'node_modules', 'x', 'index.js'), '');
  mkdirSync(path.join(dir, 'tests', '__pycache__'));
  writeFileSync(path.join(dir, 'tests', '__pycache__', 'a.pyc'), '');
  symlinkSync('calc.py', path.join(dir, 'link.py'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('snapshotWorktree', () => {
  it('honours .dockerignore and skips .git and cache folders', async () => {
    const snap = await snapshotWorktree(dir);
    expect(snap.map((e) => e.path)).toEqual([
      '.dockerignore',
      'calc.py',
      'link.py',
      'pyproject.toml',
      'tests/test_calc.py',
    ]);
    expect(snap.find((e) => e.path === 'link.py')).toMatchObject({ content: null, linkTarget: 'calc.py' });
  });

  it('packs the snapshot and the Dockerfile into a tar the engine can read', async () => {
    const snap = await snapshotWorktree(dir);
    const extract = tar.extract();
    const names: string[] = [];
    let dockerfile = '';
    const done = new Promise<void>((resolve, reject) => {
      extract.on('entry', (header, stream, next) => {
        names.push(header.name);
        const chunks: Buffer[] = [];
        stream.on('data', (c: unknown) => {
          chunks.push(c as Buffer);
        });
        stream.on('end', () => {
          if (header.name === CONTEXT_DOCKERFILE) dockerfile = Buffer.concat(chunks).toString();
          next();
        });
      });
      extract.on('finish', resolve);
      extract.on('error', reject);
    });
    packContext(snap, 'FROM scratch\n').pipe(extract as unknown as NodeJS.WritableStream);
    await done;
    expect(names).toEqual([...snap.map((e) => e.path), CONTEXT_DOCKERFILE]);
    expect(dockerfile).toBe('FROM scratch\n');
  });
});

describe('environment key', () => {
  it('parses COPY/ADD sources, skipping stages, URLs and flags', () => {
    expect(
      copiedSources(
        [
          'FROM base AS build',
          '# COPY ignored.txt /x',
          'COPY --chown=1:1 pyproject.toml ./requirements.txt /app/',
          'COPY --from=build /out /out',
          'ADD https://example.com/x.tgz /x',
          'ADD ["tests", "/t"]',
          'RUN echo \\',
          '  COPY not-an-instruction /y',
        ].join('\n'),
      ),
    ).toEqual(['pyproject.toml', './requirements.txt', 'tests']);
    expect(copiedSources('COPY *.toml /app/')).toBeNull();
    expect(fromImages('FROM a:1 AS b\nFROM b\nFROM --platform=linux/amd64 c')).toEqual(['a:1', 'c']);
  });

  it('changes with the Dockerfile, the base image and copied files, not with other files', async () => {
    const df = 'FROM agenticfix/debian:bookworm\nCOPY pyproject.toml /opt/\n';
    const key = async (d = df, base = ['sha256:1']) => environmentKey(d, await snapshotWorktree(dir), base);
    const k0 = await key();
    expect(k0).toMatch(/^[0-9a-f]{64}$/);
    expect(await key()).toBe(k0);
    expect(await key(`${df}RUN true\n`)).not.toBe(k0);
    expect(await key(df, ['sha256:2'])).not.toBe(k0);

    writeFileSync(path.join(dir, 'calc.py'), '# changed\n');
    expect(await key()).toBe(k0); // not copied
    expect(await key('FROM agenticfix/debian:bookworm\nCOPY . /src\n')).not.toBe(
      environmentKey('FROM agenticfix/debian:bookworm\nCOPY . /src\n', await snapshotWorktree(FIXTURE), [
        'sha256:1',
      ]),
    );
    writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "other"\n');
    expect(await key()).not.toBe(k0);
  });
});
