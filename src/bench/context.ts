import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  billedTokens,
  CACHED_PRICE,
  cachedPrefixTokens,
  estimateTokens,
  promptText,
} from '../agent/tokens.js';
import { loadConfig, type Config } from '../config/config.js';
import { scriptFromToolCalls, startScriptedModelServer } from '../emulator/scripted-model.js';
import { parseIssueMarkdown } from '../cli/run.js';
import { runRepair } from '../pipeline/repair.js';
import { createLedgerRepo, LEDGER_FIX_SUMMARY, LEDGER_ISSUE, ledgerTrajectory } from './ledger.js';
import { compose } from '../cli/compose.js';
import { forcedRereads } from './rereads.js';

/** Other published cached-input prices (as a share of uncached), to show how the ratio depends on it. */
const OTHER_CACHED_PRICES = [0.25, 0.5];

/** One chat-completions request as sent: its prompt tokens, the part served from cache, and its body. */
interface Sent {
  prompt_tokens: number;
  cached_tokens: number;
  messages: { role: string; content?: string | null }[];
  tools: unknown;
}

/** The completion requests a repair sent along the trajectory. */
async function sentFor(config: Config, repo: string, baseCommit: string): Promise<Sent[]> {
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
    if (result.stop_reason !== 'completed')
      throw new Error(`bench trajectory ended with ${result.stop_reason}`);
    return server.requests
      .filter((r) => r.path === '/v1/chat/completions')
      .map((r) => ({ ...(r.body as Pick<Sent, 'messages' | 'tools'>), ...r }));
  } finally {
    await server.close();
  }
}

const billed = (sent: Sent[], price: number): number =>
  Math.round(sent.reduce((n, r) => n + billedTokens(r.prompt_tokens, r.cached_tokens, price), 0));

/**
 * The full history's requests with every tool result but the newest emptied: what a policy would send
 * that shows each result whole once, right after its call, and nothing of it afterwards. No policy
 * that shows each result once bills less; cached as the scripted server caches.
 */
function floorOf(full: Sent[]): Sent[] {
  let previous: string | null = null;
  return full.map((r) => {
    const messages = r.messages.map((m, i) =>
      m.role === 'tool' && i < r.messages.length - 1 ? { ...m, content: '' } : m,
    );
    const text = promptText(messages, r.tools);
    const cached = cachedPrefixTokens(previous, text);
    previous = text;
    return { messages, tools: r.tools, prompt_tokens: estimateTokens(text), cached_tokens: cached };
  });
}

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

/**
 * The context policy against the full history on the same trajectory (ledger fixture: a 190 KB source
 * file, 606 tests): raw prompt tokens, billed-equivalent tokens (uncached + CACHED_PRICE × cached; the
 * ratio also at other published prices), the floor no policy that shows each result once can go under,
 * and forced re-reads (src/bench/rereads.ts).
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
    const policy = await sentFor(loadConfig(env, dir), repo, baseCommit);
    const full = await sentFor(
      loadConfig({ ...env, AGENTICFIX_CONTEXT_POLICY: 'false' }, dir),
      repo,
      baseCommit,
    );
    const floor = floorOf(full);
    const raw = (sent: Sent[]) => sent.reduce((n, r) => n + r.prompt_tokens, 0);
    const ratios = (price: number, suffix: string) => ({
      [`billed_ratio${suffix}`]: ratio(billed(policy, price), billed(full, price)),
      [`billed_ratio_floor${suffix}`]: ratio(billed(floor, price), billed(full, price)),
    });
    return {
      tool_calls: ledgerTrajectory().length,
      cached_price: CACHED_PRICE,
      prompt_tokens_context_policy: raw(policy),
      prompt_tokens_full_history: raw(full),
      billed_tokens_context_policy: billed(policy, CACHED_PRICE),
      billed_tokens_full_history: billed(full, CACHED_PRICE),
      raw_ratio: ratio(raw(policy), raw(full)),
      ...ratios(CACHED_PRICE, ''),
      ...Object.assign({}, ...OTHER_CACHED_PRICES.map((p) => ratios(p, `_at_cached_price_${p}`))),
      rereads: forcedRereads(policy.map((r) => r.messages)).length,
      rereads_full_history: forcedRereads(full.map((r) => r.messages)).length,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
