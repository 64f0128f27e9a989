import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { billedTokens, CACHED_PRICE } from '../agent/tokens.js';
import { loadConfig, type Config } from '../config/config.js';
import { scriptFromToolCalls, startScriptedModelServer } from '../emulator/scripted-model.js';
import { parseIssueMarkdown } from '../cli/run.js';
import { runRepair } from '../pipeline/repair.js';
import { createLedgerRepo, LEDGER_FIX_SUMMARY, LEDGER_ISSUE, ledgerTrajectory } from './ledger.js';
import { compose } from '../cli/compose.js';
import { forcedRereads } from './rereads.js';

/** Other published cached-input prices (as a share of uncached), to show how the ratio depends on it. */
const OTHER_CACHED_PRICES = [0.25, 0.5];

interface Tokens {
  raw: number;
  /** Billed-equivalent tokens at CACHED_PRICE, then at each of OTHER_CACHED_PRICES. */
  billed: number[];
  rereads: number;
  stop: string;
}

/** Prompt tokens the scripted server was sent for the trajectory, what they bill with prompt caching, re-reads. */
async function promptTokens(config: Config, repo: string, baseCommit: string): Promise<Tokens> {
  const server = await startScriptedModelServer(scriptFromToolCalls(ledgerTrajectory(), LEDGER_FIX_SUMMARY));
  try {
    const result = await runRepair({
      ...compose(config),
      config,
      remote: repo,
      baseCommit,
      issue: parseIssueMarkdown(LEDGER_ISSUE),
      testArgv: ['node', '--test'],
      model: { kind: 'url', baseUrl: server.url, name: 'bench' },
      sandbox: 'local',
    });
    const completions = server.requests.filter((r) => r.path === '/v1/chat/completions');
    const sum = (f: (r: (typeof completions)[number]) => number) => completions.reduce((n, r) => n + f(r), 0);
    return {
      raw: sum((r) => r.prompt_tokens),
      billed: [CACHED_PRICE, ...OTHER_CACHED_PRICES].map((price) =>
        Math.round(sum((r) => billedTokens(r.prompt_tokens, r.cached_tokens, price))),
      ),
      rereads: forcedRereads(completions.map((r) => (r.body as { messages: [] }).messages)).length,
      stop: result.stop_reason,
    };
  } finally {
    await server.close();
  }
}

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

/**
 * The context policy against the full history on the same trajectory (ledger fixture: a 190 KB source
 * file, 606 tests): raw prompt tokens, billed-equivalent tokens (uncached + CACHED_PRICE × cached, the
 * ratio also at other published prices) and forced re-reads (src/bench/rereads.ts).
 */
export async function benchContext(): Promise<Record<string, number>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-context-'));
  try {
    const { repo, baseCommit } = await createLedgerRepo(dir);
    const env = {
      AGENTICFIX_HOME: path.join(dir, 'home'),
      AGENTICFIX_RUNS_DIR: path.join(dir, 'runs'),
      // The full history outgrows the default budget; the comparison needs both runs to finish.
      AGENTICFIX_TOKEN_BUDGET: String(10_000_000),
    };
    const policy = await promptTokens(loadConfig(env, dir), repo, baseCommit);
    const full = await promptTokens(
      loadConfig({ ...env, AGENTICFIX_CONTEXT_POLICY: 'false' }, dir),
      repo,
      baseCommit,
    );
    for (const r of [policy, full])
      if (r.stop !== 'completed') throw new Error(`bench trajectory ended with ${r.stop}`);
    const atOtherPrices = OTHER_CACHED_PRICES.map((price, i) => [
      `billed_ratio_at_cached_price_${price}`,
      ratio(policy.billed[i + 1]!, full.billed[i + 1]!),
    ]);
    return {
      tool_calls: ledgerTrajectory().length,
      cached_price: CACHED_PRICE,
      prompt_tokens_context_policy: policy.raw,
      prompt_tokens_full_history: full.raw,
      billed_tokens_context_policy: policy.billed[0]!,
      billed_tokens_full_history: full.billed[0]!,
      raw_ratio: ratio(policy.raw, full.raw),
      billed_ratio: ratio(policy.billed[0]!, full.billed[0]!),
      ...Object.fromEntries(atOtherPrices),
      rereads: policy.rereads,
      rereads_full_history: full.rereads,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
