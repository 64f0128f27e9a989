import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OpenAIChatModel } from '../../../src/agent/model.js';
import { RETRY_AFTER_CAP_S, type RetryInfo } from '../../../src/agent/retry.js';
import { startScriptedModelServer, type ScriptStep } from '../../../src/emulator/scripted-model.js';
import { localJudge, startEmulatedApp, startEmulator, testConfig } from '../../support/app.js';
import { calcRunEnded, SCRIPTED_DEPS } from '../../support/app-world.js';

/**
 * Provider failures are said (issue 37): what the provider asks for is honoured, a reply cut mid-body is
 * retried, and a provider that fails for good fails the run with its error on the issue, never "Done".
 */

const REPLY: ScriptStep = { content: 'hello', tool_calls: [] };

async function client(steps: ScriptStep[], retryBaseMs = 10) {
  const server = await startScriptedModelServer(steps);
  const retries: RetryInfo[] = [];
  const model = new OpenAIChatModel({
    baseUrl: server.url,
    apiKey: 'k',
    name: 'scripted',
    timeoutMs: 5000,
    maxRetries: 4,
    retryBaseMs,
    maxReplyBytes: 1 << 20,
    onRetry: (r) => retries.push(r),
  });
  return { server, model, retries };
}

describe('the model client and a failing provider', () => {
  // Issue 37: a 429 with `retry-after: 20` was retried at 0.6/1.3/2.6/6.2 s and given up at 11 s.
  it('waits what retry-after asks (in units of AGENTICFIX_MODEL_RETRY_BASE_MS), capped', async () => {
    const { server, model, retries } = await client([
      { status: 429, headers: { 'retry-after': '20' } },
      { status: 503, headers: { 'retry-after': String(10 * RETRY_AFTER_CAP_S) } },
      REPLY,
    ]);
    try {
      const started = Date.now();
      const reply = await model.complete([{ role: 'user', content: 'hi' }], []);
      expect(reply.message.content).toBe('hello');
      expect(retries.map((r) => [r.status, r.delay_ms])).toEqual([
        [429, 200],
        [503, RETRY_AFTER_CAP_S * 10],
      ]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(200 + RETRY_AFTER_CAP_S * 10);
    } finally {
      await server.close();
    }
  });

  // Issue 37: a reply cut mid-body failed the run at once with "terminated".
  it('retries a reply whose body was cut mid-read, like a timeout', async () => {
    const { server, model, retries } = await client([{ ...REPLY, cut: true }, REPLY]);
    try {
      const reply = await model.complete([{ role: 'user', content: 'hi' }], []);
      expect(reply.message.content).toBe('hello');
      expect(retries).toEqual([expect.objectContaining({ attempt: 1, error: 'terminated' })]);
      expect(server.requests).toHaveLength(2);
    } finally {
      await server.close();
    }
  });
});

describe('a provider that fails for good', () => {
  // Issue 37: a provider answering 500 ended `done` with "empty_patch" under "✅ Done", its error nowhere.
  it('ends the run failed with ❌ and the provider’s error (secrets redacted); the judge never runs', async () => {
    const O = 'acme';
    const R = 'down';
    const key = 'sk-live-provider-key-0123456789abcdef';
    const failing = {
      status: 500,
      body: { error: { message: `upstream overloaded (key ${key})`, type: 'server_error' } },
    };
    const model = await startScriptedModelServer(Array(3).fill(failing));
    const emu = await startEmulator();
    const home = mkdtempSync(path.join(tmpdir(), 'faults-provider-'));
    let judged = 0;
    const app = await startEmulatedApp(emu, {
      config: testConfig(home, { AGENTICFIX_MODEL_MAX_RETRIES: '2', AGENTICFIX_MODEL_RETRY_BASE_MS: '1' }),
      deps: {
        ...SCRIPTED_DEPS,
        judge: async (o) => {
          judged++;
          return localJudge(o);
        },
      },
      model: { kind: 'url', baseUrl: model.url, name: 'scripted', apiKey: key },
      sandbox: 'local',
    });
    try {
      const run = await calcRunEnded(app, emu, O, R);
      expect(run).toMatchObject({ state: 'failed', stop_reason: 'model_error', verdict: null });
      expect(judged).toBe(0);
      expect(model.requests).toHaveLength(3);
      const status = emu.comments(run!.issue).find((c) => c.id === run!.status_comment_id)!.body;
      expect(status).toContain('### AgenticFix: ❌ Failed');
      expect(status).toContain('The model provider failed: 500 upstream overloaded');
      expect(status).not.toContain('✅ Done');
      for (const c of emu.comments(run!.issue)) expect(c.body).not.toContain(key);
      expect(emu.pulls).toHaveLength(0);
    } finally {
      await app.close();
      await model.close();
      await emu.close();
      rmSync(home, { recursive: true, force: true });
    }
  }, 60_000);
});
