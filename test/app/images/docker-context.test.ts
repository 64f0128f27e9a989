import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
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
} from '../../../src/images/docker-context.js';
import { loadConfig } from '../../../src/config/config.js';

const FIXTURE = path.join(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../..'),
  'fixtures',
  'pyproject-ok',
);

const MAX = loadConfig({}).sandbox.buildContextMaxBytes;

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
    const snap = await snapshotWorktree(dir, MAX);
    expect(snap.map((e) => e.path)).toEqual([
      '.dockerignore',
      'calc.py',
      'link.py',
      'pyproject.toml',
      'tests/test_calc.py',
    ]);
    expect(snap.find((e) => e.path === 'link.py')).toMatchObject({ content: null, linkTarget: 'calc.py' });
  });

  it('a FIFO as .dockerignore (or elsewhere) and a socket are skipped at once, never read', async () => {
    // The attack: a test planted a named pipe as .dockerignore and build_environment hung for 15 minutes.
    rmSync(path.join(dir, '.dockerignore'));
    execFileSync('mkfifo', [path.join(dir, '.dockerignore'), path.join(dir, 'tests', 'pipe.py')]);
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(dir, 'sock'), resolve));
    try {
      const started = Date.now();
      const snap = await snapshotWorktree(dir, MAX);
      expect(Date.now() - started).toBeLessThan(5000);
      const paths = snap.map((e) => e.path);
      expect(paths).not.toContain('.dockerignore');
      expect(paths).not.toContain('tests/pipe.py');
      expect(paths).not.toContain('sock');
      // Without an ignore file nothing is ignored; the link stays a link.
      expect(paths).toEqual(expect.arrayContaining(['calc.py', 'link.py', 'tests/test_calc.py']));
      expect(snap.find((e) => e.path === 'link.py')).toMatchObject({ content: null, linkTarget: 'calc.py' });
    } finally {
      server.close();
    }
  });

  it('a symlink to a host file is packed as a link, its target never read', async () => {
    symlinkSync('/etc/hostname', path.join(dir, 'host.txt'));
    rmSync(path.join(dir, '.dockerignore'));
    symlinkSync('/etc/passwd', path.join(dir, '.dockerignore'));
    const snap = await snapshotWorktree(dir, MAX);
    expect(snap.find((e) => e.path === 'host.txt')).toEqual({
      path: 'host.txt',
      mode: 0o777,
      content: null,
      linkTarget: '/etc/hostname',
    });
    expect(snap.find((e) => e.path === '.dockerignore')).toMatchObject({ content: null });
    expect(snap.every((e) => e.content === null || !e.content.includes('root:x:0:0'))).toBe(true);
  });

  it('a worktree larger than the context cap fails with a clear error, without reading it whole', async () => {
    writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(3 * 1024 * 1024));
    await expect(snapshotWorktree(dir, 1024 * 1024)).rejects.toThrow(
      /build context is over 1 MiB \(AGENTICFIX_BUILD_CONTEXT_MAX_MB\).*\.dockerignore/,
    );
    writeFileSync(path.join(dir, '.dockerignore'), 'big.bin\n');
    expect((await snapshotWorktree(dir, 1024 * 1024)).map((e) => e.path)).not.toContain('big.bin');
  });

  it('packs the snapshot and the Dockerfile into a tar the engine can read', async () => {
    const snap = await snapshotWorktree(dir, MAX);
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
    const key = async (d = df, base = ['sha256:1']) =>
      environmentKey(d, await snapshotWorktree(dir, MAX), base);
    const k0 = await key();
    expect(k0).toMatch(/^[0-9a-f]{64}$/);
    expect(await key()).toBe(k0);
    expect(await key(`${df}RUN true\n`)).not.toBe(k0);
    expect(await key(df, ['sha256:2'])).not.toBe(k0);

    writeFileSync(path.join(dir, 'calc.py'), '# changed\n');
    expect(await key()).toBe(k0); // not copied
    expect(await key('FROM agenticfix/debian:bookworm\nCOPY . /src\n')).not.toBe(
      environmentKey('FROM agenticfix/debian:bookworm\nCOPY . /src\n', await snapshotWorktree(FIXTURE, MAX), [
        'sha256:1',
      ]),
    );
    writeFileSync(path.join(dir, 'pyproject.toml'), '[project]\nname = "other"\n');
    expect(await key()).not.toBe(k0);
  });
});
