import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gitDependencyHint } from '../../../src/images/git-deps.js';
import { BuildLogCompactor, compactBuildLog, DEFAULT_COMPACT } from '../../../src/images/buildlog.js';

/** A long apt build whose failure sits in the middle of thousands of progress lines. */
function syntheticLog(): string[] {
  const lines: string[] = ['Step 1/3 : FROM agenticfix/debian:bookworm', ' ---> c057d5a9288c'];
  for (let i = 0; i < 5000; i++)
    lines.push(`Get:${i} http://deb.debian.org/debian bookworm/main amd64 pkg${i} [${i} kB]`);
  lines.push('Step 2/3 : RUN apt-get update && apt-get install -y no-such-package-xyz');
  lines.push('Reading package lists...');
  lines.push('E: Unable to locate package no-such-package-xyz');
  lines.push(
    "ERROR: The command '/bin/sh -c apt-get update && apt-get install -y no-such-package-xyz' returned a non-zero code: 100",
  );
  for (let i = 0; i < 4994; i++) lines.push(`Progress ${i}%`);
  return lines;
}

describe('compactBuildLog', () => {
  it('keeps the error lines and the failing step of a 10k-line log, with head and tail', () => {
    const lines = syntheticLog();
    expect(lines).toHaveLength(10_000);
    const log = compactBuildLog(lines, 'failed');
    expect(log.total_lines).toBe(10_000);
    expect(log.truncated).toBe(true);
    expect(log.exit_status).toBe('failed');
    expect(log.head).toHaveLength(DEFAULT_COMPACT.headLines);
    expect(log.head[0]).toBe('Step 1/3 : FROM agenticfix/debian:bookworm');
    expect(log.tail).toHaveLength(DEFAULT_COMPACT.tailLines);
    expect(log.tail.at(-1)).toBe('Progress 4993%');
    expect(log.error_lines).toEqual([
      'Step 2/3 : RUN apt-get update && apt-get install -y no-such-package-xyz',
      'E: Unable to locate package no-such-package-xyz',
      "ERROR: The command '/bin/sh -c apt-get update && apt-get install -y no-such-package-xyz' returned a non-zero code: 100",
    ]);
    // The whole compact log stays small whatever the build printed.
    expect(JSON.stringify(log).length).toBeLessThan(12_000);
  });

  it('recognises pip, npm and BuildKit failures', () => {
    const log = compactBuildLog(
      [
        'Collecting foo',
        'ERROR: Could not find a version that satisfies the requirement foo (from versions: none)',
        'ERROR: No matching distribution found for foo',
        'npm ERR! code E404',
        'ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
        'Done',
      ],
      'failed',
    );
    expect(log.error_lines).toHaveLength(4);
    expect(log.error_lines).not.toContain('Collecting foo');
    expect(log.truncated).toBe(false);
    expect(log.tail).toEqual([]);
    expect(log.head).toHaveLength(6);
  });

  it('caps error lines (keeping the first, which name the cause) and clips long lines', () => {
    const lines = Array.from(
      { length: 500 },
      (_, i) => `ERROR: failure ${i} ${'x'.repeat(i === 0 ? 2000 : 0)}`,
    );
    const log = compactBuildLog(lines, 'failed');
    expect(log.error_lines[0]?.length).toBe(DEFAULT_COMPACT.maxLineChars + 1);
    expect(log.error_lines[1]).toBe('ERROR: failure 1 ');
    expect(log.error_lines.at(-1)).toBe(
      `… ${500 - DEFAULT_COMPACT.maxErrorLines} more error-like lines omitted`,
    );
    expect(log.truncated).toBe(true);
  });

  it('a successful build without error lines has none', () => {
    const log = compactBuildLog(['Step 1/1 : FROM x', 'Successfully built abc'], 'ok');
    expect(log).toEqual({
      exit_status: 'ok',
      head: ['Step 1/1 : FROM x', 'Successfully built abc'],
      tail: [],
      error_lines: [],
      total_lines: 2,
      truncated: false,
    });
  });
});

describe('BuildLogCompactor (streaming)', () => {
  const streamed = (chunks: readonly string[]) => {
    const c = new BuildLogCompactor();
    for (const chunk of chunks) c.write(chunk);
    return c.result('failed');
  };

  it('gives the same compact log as the whole list, however the output is chunked', () => {
    const lines = syntheticLog();
    const raw = lines.map((l) => `${l}\n`).join('');
    const chunks: string[] = [];
    for (let i = 0, n = 1; i < raw.length; i += n, n = ((n * 7 + 3) % 4999) + 1)
      chunks.push(raw.slice(i, i + n));
    expect(chunks.length).toBeGreaterThan(100);
    expect(streamed(chunks)).toEqual(compactBuildLog(lines, 'failed'));
  });

  it('keeps what a terminal shows after carriage returns and drops blank lines', () => {
    expect(streamed(['a\r\nGet 10%\rGet 5', '0%\rGet 100%\n\n  \nb\n']).head).toEqual(['a', 'Get 100%', 'b']);
  });

  it('strips the colour codes the builder puts around stderr, also split across chunks', () => {
    const log = streamed(['\x1b[9', '1mE: Unable to locate package x\n\x1b[0m']);
    expect(log.head).toEqual(['E: Unable to locate package x']);
    expect(log.error_lines).toEqual(['E: Unable to locate package x']);
  });

  it('a 50 MB line without a newline is held clipped, not whole', () => {
    const c = new BuildLogCompactor();
    const chunk = 'x'.repeat(1024 * 1024);
    for (let i = 0; i < 50; i++) c.write(chunk);
    c.write('\rERROR: the real cause\n');
    const log = c.result('failed');
    expect(log.total_lines).toBe(1);
    expect(log.head).toEqual(['ERROR: the real cause']);
    const c2 = new BuildLogCompactor();
    for (let i = 0; i < 50; i++) c2.write(chunk);
    const cut = c2.result('failed');
    expect(cut.head[0]).toBe(`${'x'.repeat(DEFAULT_COMPACT.maxLineChars)}…`);
    expect(cut.truncated).toBe(true);
  });

  it('counts every line of a long stream and keeps only head, tail and errors', () => {
    const c = new BuildLogCompactor();
    const block = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n') + '\n';
    for (let i = 0; i < 1000; i++) c.write(block);
    const log = c.result('ok');
    expect(log.total_lines).toBe(1_000_000);
    expect(log.head).toHaveLength(DEFAULT_COMPACT.headLines);
    expect(log.tail).toHaveLength(DEFAULT_COMPACT.tailLines);
    expect(log.tail.at(-1)).toBe('line 999');
    expect(JSON.stringify(log).length).toBeLessThan(12_000);
  });
});

describe('a build that fails on a git-URL dependency', () => {
  it('names the dependency and says builds reach only package registries', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'git-deps-'));
    try {
      writeFileSync(
        path.join(dir, 'package.json'),
        JSON.stringify({ dependencies: { left: '^1.0.0', 'bars-lib': 'github:acme/bars-lib#v2' } }),
      );
      // npm's own lines (npm 9 in a node image without git).
      const log = [
        'npm ERR! code ENOENT',
        'npm ERR! syscall spawn git',
        'npm ERR! path git',
        'npm ERR! errno -2',
      ];
      expect(gitDependencyHint(log, dir)).toBe(
        'npm had to fetch bars-lib (github:acme/bars-lib#v2) with git: builds reach only package registries ' +
          '(npm, PyPI, Debian), not git hosts. Use a version published on the registry, or vendor the code into the repository.',
      );
      expect(gitDependencyHint(['npm ERR! code E404'], dir)).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
