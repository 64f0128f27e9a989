import { jest } from '@jest/globals';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redactor, REDACTED } from '../../../src/trace/redact.js';
import { RunTrace, TraceError, sha256 } from '../../../src/trace/trace.js';
import { PhaseClock, stopwatch } from '../../../src/trace/phases.js';

const tmp = () => mkdtempSync(path.join(tmpdir(), 'trace-'));

describe('RunTrace', () => {
  it('appends events, keeps state and writes result.json with artifact hashes', () => {
    const trace = new RunTrace('r1', tmp());
    trace.event('tool_start', { name: 'read_file', args: { path: 'a' } });
    trace.event('tool_end', { name: 'read_file', duration_ms: 3 });
    trace.writeState({ step: 2 });
    const art = trace.writeArtifact('final.patch', 'diff --git a/x b/x\n');
    trace.writeResult({
      run_id: 'r1',
      stop_reason: 'completed',
      success: true,
      started_at: 'a',
      finished_at: 'b',
      counts: { tool_calls: 1 },
      artifacts: [art],
    });
    const events = trace.readEvents();
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'tool_start'],
      [2, 'tool_end'],
    ]);
    expect(JSON.parse(readFileSync(trace.statePath, 'utf8'))).toEqual({ step: 2 });
    const result = JSON.parse(readFileSync(trace.resultPath, 'utf8'));
    expect(result.artifacts[0].sha256).toBe(sha256('diff --git a/x b/x\n'));
  });

  it('redacts known secrets, token-looking strings and sensitive fields everywhere', () => {
    const secret = 'super-secret-model-key-123';
    const trace = new RunTrace('r2', tmp(), [secret]);
    trace.event('model_request', {
      note: `using ${secret}`,
      headers: { authorization: 'Bearer abc', api_key: 'zzz' },
      nested: [{ text: 'token ghs_abcdefghijklmnopqrstuvwxyz0123 here' }],
    });
    const raw = readFileSync(trace.eventsPath, 'utf8');
    expect(raw).not.toContain(secret);
    expect(raw).not.toContain('ghs_abcdefghijklmnopqrstuvwxyz0123');
    expect(raw).not.toContain('Bearer abc');
    expect(raw.split(REDACTED).length - 1).toBe(4);
  });

  it('fails with TraceError when the trace cannot be written', () => {
    const trace = new RunTrace('r3', tmp());
    // A directory where the event log should be makes every append fail, for root too.
    mkdirSync(trace.eventsPath);
    expect(() => trace.event('x')).toThrow(TraceError);
    expect(() => new RunTrace('r4', '/dev/null/runs')).toThrow(TraceError);
  });

  it('leaves short strings alone so ordinary words are not redacted', () => {
    expect(new Redactor(['abc', undefined]).text('abc def')).toBe('abc def');
  });
});

describe('durations', () => {
  afterEach(() => jest.useRealTimers());

  it('come from the monotonic clock: a wall clock stepped mid-run changes neither a stopwatch nor a phase', () => {
    jest.useFakeTimers({ doNotFake: ['performance'], now: Date.now() });
    const elapsed = stopwatch();
    const phases = new PhaseClock();
    phases.start('agent');
    jest.setSystemTime(Date.now() + 3_600_000); // the system clock steps an hour forward
    phases.stop();
    expect(elapsed()).toBeLessThan(1000);
    expect(phases.snapshot().agent).toBeLessThan(1000);
  });
});
