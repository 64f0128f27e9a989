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
import {
  createLedgerRepo,
  LEDGER_FIX_SUMMARY,
  LEDGER_ISSUE,
  ledgerLongTrajectory,
  ledgerTrajectory,
  type Call,
} from './ledger.js';
import { compose } from '../cli/compose.js';
import { forcedRereads } from './rereads.js';
import { billedByPart, type Sent } from './context-parts.js';
import type { BenchOptions } from './options.js';

/** Other published cached-input prices (as a share of uncached), to show how the ratio depends on it. */
const OTHER_CACHED_PRICES = [0.25, 0.5];

/** The completion requests a repair sent along the trajectory. */
async function sentFor(config: Config, repo: string, baseCommit: string, calls: Call[]): Promise<Sent[]> {
  const server = await startScriptedModelServer(scriptFromToolCalls(calls, LEDGER_FIX_SUMMARY));
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

const halfCut = (run: Sent[], full: Sent[]) =>
  Math.max(0, 2 * billed(run, CACHED_PRICE) - billed(full, CACHED_PRICE));

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

/**
 * The context policy against the full history on one trajectory: raw prompt tokens, billed-equivalent
 * tokens (uncached + CACHED_PRICE × cached; the ratio also at other published prices), the floor no
 * policy that shows each result once can go under, forced re-reads (src/bench/rereads.ts), and the
 * billed tokens of both runs and of the floor by part (src/bench/context-parts.ts), which show where the
 * ratio comes from.
 */
async function compare(
  env: Record<string, string>,
  dir: string,
  calls: Call[],
  prefix: string,
): Promise<Record<string, number | string>> {
  const { repo, baseCommit } = await createLedgerRepo(dir);
  const policy = await sentFor(loadConfig(env, dir), repo, baseCommit, calls);
  const full = await sentFor(
    loadConfig({ ...env, AGENTICFIX_CONTEXT_POLICY: 'false' }, dir),
    repo,
    baseCommit,
    calls,
  );
  const floor = floorOf(full);
  const raw = (sent: Sent[]) => sent.reduce((n, r) => n + r.prompt_tokens, 0);
  const ratios = (price: number, suffix: string) => ({
    [`billed_ratio${suffix}`]: ratio(billed(policy, price), billed(full, price)),
    [`billed_ratio_floor${suffix}`]: ratio(billed(floor, price), billed(full, price)),
  });
  const parts = (run: string, sent: Sent[]) =>
    Object.fromEntries(
      Object.entries(billedByPart(sent, CACHED_PRICE)).map(([k, v]) => [`billed_${run}_${k}`, v]),
    );
  const rereads = forcedRereads(policy.map((r) => r.messages));
  const out: Record<string, number | string> = {
    tool_calls: calls.length,
    prompt_tokens_context_policy: raw(policy),
    prompt_tokens_full_history: raw(full),
    billed_tokens_context_policy: billed(policy, CACHED_PRICE),
    billed_tokens_full_history: billed(full, CACHED_PRICE),
    billed_tokens_floor: billed(floor, CACHED_PRICE),
    // What both runs would have to stop paying (schemas, prompts: x off each side of the ratio) for the
    // policy, and for the floor that carries nothing, to reach 0.50: 2 × it − full, or 0. Above the
    // schemas', system prompt's and task's billed tokens together, no shortening of them reaches 0.50.
    shared_cut_for_half: halfCut(policy, full),
    shared_cut_for_floor_half: halfCut(floor, full),
    raw_ratio: ratio(raw(policy), raw(full)),
    ...ratios(CACHED_PRICE, ''),
    ...Object.assign({}, ...OTHER_CACHED_PRICES.map((p) => ratios(p, `_at_cached_price_${p}`))),
    rereads: rereads.length,
    ...(rereads.length ? { rereads_calls: rereads.join('; ') } : {}),
    rereads_full_history: forcedRereads(full.map((r) => r.messages)).length,
    ...parts('policy', policy),
    ...parts('full', full),
    // The floor by part: what both runs pay (schemas, prompts, assistant turns, each result's first
    // showing) against the full history's bill; the ratio no such policy can go under.
    ...parts('floor', floor),
  };
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [prefix + k, v]));
}

/**
 * The context policy against the full history on the ledger fixture (a 190 KB source file, 606
 * tests), along two trajectories: a capable model's 25 calls, and a weaker model's longer one
 * (figures prefixed `long_`; not with --smoke, since the unit test runs it: test/unit/bench).
 */
export async function benchContext(
  o: BenchOptions = { smoke: false },
): Promise<Record<string, number | string>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-context-'));
  try {
    const env = {
      AGENTICFIX_HOME: path.join(dir, 'home'),
      AGENTICFIX_RUNS_DIR: path.join(dir, 'runs'),
      // The full history outgrows the default budget; the comparison needs both runs to finish.
      AGENTICFIX_TOKEN_BUDGET: String(10_000_000),
      // The long trajectory makes more requests than the default allows.
      AGENTICFIX_REQUEST_BUDGET: String(200),
      // The long trajectory's reproduction scripts; the bench's sandbox is the host.
      AGENTICFIX_RUN_COMMAND_LOCAL: 'true',
    };
    return {
      cached_price: CACHED_PRICE,
      ...(await compare(env, dir, ledgerTrajectory(), '')),
      ...(o.smoke ? {} : await compare(env, dir, ledgerLongTrajectory(), 'long_')),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
