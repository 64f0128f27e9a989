import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config/config.js';
import { runAppDemo } from '../src/demo/app.js';
import { dockerReady } from './support/docker.js';

describe('demo: label → verified draft PR, through the emulator, the real app, the scripted model and Docker', () => {
  it('opens a draft PR with the evidence and reports the calculator numbers', async () => {
    if (!(await dockerReady())) return;
    const dir = mkdtempSync(path.join(tmpdir(), 'demo-app-'));
    const config = loadConfig({ AGENTICFIX_HOME: '.af', AGENTICFIX_RUNS_DIR: 'runs' }, dir);
    const s = await runAppDemo({ config, model: 'scripted', log: () => {} });
    expect(s.error).toBeNull();
    expect(s).toMatchObject({
      result: 'success',
      verdict: 'verified',
      stop_reason: 'completed',
      base_tests: { passed: 3, failed: 2 },
      after_tests: { passed: 5, failed: 0 },
      verify_tests: { passed: 5, failed: 0 },
      pr: { draft: true },
    });
    expect(s.pr!.head).toMatch(/^agenticfix\/issue-\d+$/);
    expect(readFileSync(s.patch_path!, 'utf8')).toContain('+  return a - b;');
    expect(readFileSync(s.trace_path!, 'utf8')).toContain('"build_environment"');
    const prComments = s.comments.filter((c) => c.on === 'pr').map((c) => c.body);
    expect(prComments.some((b) => b.includes('verified') && b.includes('| base'))).toBe(true);
    expect(s.comments.some((c) => c.on === 'issue')).toBe(true);
  });
});
