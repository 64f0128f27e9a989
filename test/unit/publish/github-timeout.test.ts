import { loadConfig } from '../../../src/config/config.js';
import { appOctokit } from '../../../src/publish/github.js';

/**
 * Issue 40 (acknowledgement p99): each GitHub request's deadline ends with the request. A deadline of
 * AbortSignal.timeout fired 30 s later whatever had become of its request, so a burst's intake left
 * hundreds of timers that aborted and built a DOMException each in the middle of a later burst's answers.
 */
test('a request that was answered leaves no deadline behind: its signal never aborts after the answer', async () => {
  const config = loadConfig({ AGENTICFIX_GITHUB_TIMEOUT_MS: '100' });
  const signals: AbortSignal[] = [];
  const Octokit = appOctokit(config);
  const gh = new Octokit({
    auth: { token: 'ghs_test' },
    request: {
      fetch: async (_url: string, init: { signal: AbortSignal }) => {
        signals.push(init.signal);
        return new Response(JSON.stringify({ id: 1 }), {
          status: 200,
          headers: { 'content-type': 'application/json' },
        });
      },
    },
  });
  expect((await gh.request('GET /repos/{owner}/{repo}', { owner: 'a', repo: 'b' })).data).toEqual({ id: 1 });
  expect(signals).toHaveLength(1);
  await new Promise((r) => setTimeout(r, 300));
  expect(signals[0]!.aborted).toBe(false);
});

test('a request that is not answered in time is still cut off at its deadline', async () => {
  const config = loadConfig({ AGENTICFIX_GITHUB_TIMEOUT_MS: '100', AGENTICFIX_GITHUB_RETRY_BASE_MS: '1' });
  const reasons: unknown[] = [];
  const Octokit = appOctokit(config);
  const gh = new Octokit({
    auth: { token: 'ghs_test' },
    request: {
      // Never answers: ends only when its signal aborts.
      fetch: (_url: string, init: { signal: AbortSignal }) =>
        new Promise((_, reject) =>
          init.signal.addEventListener('abort', () => {
            reasons.push(init.signal.reason);
            reject(init.signal.reason as Error);
          }),
        ),
    },
  });
  const t0 = Date.now();
  await expect(gh.request('GET /repos/{owner}/{repo}', { owner: 'a', repo: 'b' })).rejects.toThrow(
    /could not be reached/,
  );
  // Each try cut off after 100 ms, with the reason AbortSignal.timeout gives (retried as a 5xx is).
  expect(reasons.length).toBeGreaterThan(1);
  expect(reasons.every((r) => (r as Error).name === 'TimeoutError')).toBe(true);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(100 * reasons.length);
});
