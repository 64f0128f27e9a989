import { jest } from '@jest/globals';
import { workerCommand } from '../../../src/cli/worker.js';
import { APP_ID, PRIVATE_KEY } from '../../support/app.js';

describe('agenticfix worker', () => {
  const saved = { ...process.env };
  afterEach(() => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  });

  async function run(env: Record<string, string>): Promise<[number, string]> {
    for (const k of ['AGENTICFIX_REDIS_URL', 'AGENTICFIX_DATABASE_URL', 'APP_ID', 'PRIVATE_KEY'])
      delete process.env[k];
    Object.assign(process.env, env);
    const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const code = await workerCommand([]);
      return [code, stderr.mock.calls.map((c) => String(c[0])).join('')];
    } finally {
      stderr.mockRestore();
    }
  }

  it('refuses to start without the app credentials or the shared queue and store, saying what to set', async () => {
    expect(await run({})).toEqual([
      2,
      expect.stringMatching(/^agenticfix worker: settings: APP_ID is not set; /m),
    ]);
    const app = { APP_ID: String(APP_ID), PRIVATE_KEY };
    expect(await run(app)).toEqual([
      2,
      expect.stringContaining('AGENTICFIX_REDIS_URL and AGENTICFIX_DATABASE_URL are not set'),
    ]);
    expect(await run({ ...app, AGENTICFIX_REDIS_URL: 'redis://127.0.0.1:1' })).toEqual([
      2,
      expect.stringContaining('AGENTICFIX_REDIS_URL needs AGENTICFIX_DATABASE_URL'),
    ]);
  });
});
