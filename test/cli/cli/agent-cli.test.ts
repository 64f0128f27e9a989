import { jest } from '@jest/globals';
import { execa } from 'execa';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseIssueMarkdown, progressLine, runCommand } from '../../../src/cli/run.js';
import { scriptFromToolCalls } from '../../../src/emulator/scripted-model.js';
import type { RepairResult } from '../../../src/agent/types.js';
import { splitArgv } from '../../../src/verify/argv.js';
import { git } from '../../../src/workspace/git.js';
import { commitAll, tempDir } from '../../support/git-fixtures.js';
import { fileVersion } from '../../../src/tools/files.js';

const FIXTURE = fileURLToPath(new URL('../../fixtures/agent-repo', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('agenticfix run', () => {
  it('splits the test command and parses the issue file', () => {
    expect(splitArgv(`node --test "a b" 'c d'  e`)).toEqual(['node', '--test', 'a b', 'c d', 'e']);
    expect(parseIssueMarkdown('\n# add() subtracts\n\nbody\nmore\n')).toEqual({
      title: 'add() subtracts',
      body: 'body\nmore',
    });
  });

  it('rejects bad flags with usage (exit 2)', async () => {
    const err = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await runCommand(['--repo', 'x'])).toBe(2);
      expect(await runCommand(['--nope'])).toBe(2);
      expect(await runCommand(['--repo', 'x', '--issue', 'i', '--test', 't', '--model', 'gpt'])).toBe(2);
      expect(String(err.mock.calls.at(-1)?.[0])).toMatch(
        /^agenticfix run: --model: must be scripted:<file> or human/,
      );
    } finally {
      err.mockRestore();
    }
  });

  it('a run that fails in the workspace step prints its phases with times and its reason on stderr', async () => {
    const tmp = await tempDir('agenticfix-cli-fatal-');
    const script = path.join(tmp.dir, 'script.json');
    writeFileSync(script, JSON.stringify({ model: 'cli-scripted', steps: [] }));
    writeFileSync(path.join(tmp.dir, 'ISSUE.md'), '# t\n\nb\n');
    const saved = { ...process.env };
    process.env.AGENTICFIX_HOME = path.join(tmp.dir, 'home');
    process.env.AGENTICFIX_RUNS_DIR = path.join(tmp.dir, 'runs');
    const err: string[] = [];
    const stdout = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
    try {
      const code = await runCommand([
        ...['--repo', path.join(tmp.dir, 'no-such-repo'), '--base', 'main'],
        ...['--issue', path.join(tmp.dir, 'ISSUE.md'), '--test', 'node --test'],
        ...['--model', `scripted:${script}`, '--sandbox', 'local', '--json'],
      ]);
      expect(code).toBe(1);
      const text = err.join('');
      // It printed "[preparing_workspace]" and "[done]" and nothing else.
      expect(text).toMatch(/^\[preparing_workspace, \d+ s\]$/m);
      expect(text).toMatch(/^run failed: .*no-such-repo/m);
    } finally {
      stdout.mockRestore();
      stderr.mockRestore();
      process.env = saved;
      await tmp.cleanup();
    }
  });

  it('build progress: each step with the time since the build and since the run started', () => {
    const p = {
      phase: 'working',
      step: 3,
      tokens_used: 0,
      token_budget: 1,
      cost_usd: null,
      cost_budget: null,
      last_test: null,
    } as const;
    expect(progressLine(p, 1000)).toBeNull();
    expect(progressLine({ ...p, phase: 'building_environment' }, 2400)).toBe('[building_environment, 2 s]');
    expect(
      progressLine({ ...p, build: { step: 'Step 3/7 : RUN npm ci', elapsed_ms: 95_000 } }, 400_000),
    ).toBe('[build 95 s, run 400 s] Step 3/7 : RUN npm ci');
  });

  it('runs one repair with --model scripted:<file> --sandbox local --json and prints the RepairResult', async () => {
    const tmp = await tempDir('agenticfix-cli-');
    const repo = path.join(tmp.dir, 'repo');
    cpSync(FIXTURE, repo, { recursive: true });
    await git(['init', '-q', '-b', 'main'], { cwd: repo });
    await commitAll(repo, 'fixture');
    const version = fileVersion(readFileSync(path.join(repo, 'src/math.js')));
    const script = path.join(tmp.dir, 'script.json');
    const calls = [
      {
        name: 'edit_file',
        arguments: { path: 'src/math.js', old_text: 'a - b', new_text: 'a + b', version },
      },
      { name: 'run_tests', arguments: {} },
    ];
    writeFileSync(
      script,
      JSON.stringify({ model: 'cli-scripted', steps: scriptFromToolCalls(calls, 'add now adds') }),
    );
    const saved = { ...process.env };
    process.env.AGENTICFIX_HOME = path.join(tmp.dir, 'home');
    process.env.AGENTICFIX_RUNS_DIR = path.join(tmp.dir, 'runs');
    const out: string[] = [];
    const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const code = await runCommand([
        '--repo',
        repo,
        '--base',
        'main',
        '--issue',
        path.join(repo, 'ISSUE.md'),
        '--test',
        'node --test',
        '--model',
        `scripted:${script}`,
        '--sandbox',
        'local',
        '--json',
      ]);
      stdout.mockRestore();
      const result = JSON.parse(out.join('')) as RepairResult;
      expect(code).toBe(0);
      expect(result).toMatchObject({
        stop_reason: 'completed',
        model_name: 'cli-scripted',
        summary: 'add now adds',
      });
      expect(result.run_dir.startsWith(path.join(tmp.dir, 'runs'))).toBe(true);
      expect(readFileSync(result.patch_path, 'utf8')).toContain('+  return a + b;');
    } finally {
      stdout.mockRestore();
      stderr.mockRestore();
      process.env = saved;
      await tmp.cleanup();
    }
  });

  it('--model human: a heredoc edit, then finish ends the process although its input stays open', async () => {
    const tmp = await tempDir('agenticfix-cli-human-');
    try {
      const repo = path.join(tmp.dir, 'repo');
      cpSync(FIXTURE, repo, { recursive: true });
      await git(['init', '-q', '-b', 'main'], { cwd: repo });
      await commitAll(repo, 'fixture');
      const version = fileVersion(readFileSync(path.join(repo, 'src/math.js')));
      const child = execa(
        'node',
        [
          path.join(ROOT, 'dist/cli/index.js'),
          'run',
          '--repo',
          repo,
          '--issue',
          path.join(repo, 'ISSUE.md'),
        ].concat(['--test', 'node --test', '--model', 'human', '--sandbox', 'local']),
        {
          env: {
            AGENTICFIX_HOME: path.join(tmp.dir, 'home'),
            AGENTICFIX_RUNS_DIR: path.join(tmp.dir, 'runs'),
          },
          reject: false,
          timeout: 60_000,
        },
      );
      child.stdin.write(
        [
          `edit_file {"path": "src/math.js", "version": "${version}"} <<old_text <<new_text`,
          '  return a - b;',
          'old_text',
          '  return a + b;',
          'new_text',
          'run_tests',
          'finish {"summary": "add() adds"}',
        ].join('\n') + '\n',
      );
      // stdin is never ended: the process must still exit after finish.
      const done = await child;
      expect(done.timedOut).toBe(false);
      expect(done.exitCode).toBe(0);
      expect(done.stdout).toMatch(/"status":"passed"/);
      expect(done.stdout).toMatch(/: completed/);
      child.stdin.destroy();
    } finally {
      await tmp.cleanup();
    }
  }, 90_000);
});
