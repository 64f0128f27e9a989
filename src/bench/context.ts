import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { billedTokens } from '../agent/tokens.js';
import { loadConfig, type Config } from '../config/config.js';
import { scriptFromToolCalls, startScriptedModelServer } from '../emulator/scripted-model.js';
import { parseIssueMarkdown } from '../cli/run.js';
import { runRepair } from '../pipeline/repair.js';
import { createLedgerRepo, LEDGER_FIX_SUMMARY, LEDGER_ISSUE, ledgerTrajectory } from './ledger.js';
import { compose } from '../cli/compose.js';

interface Tokens {
  raw: number;
  billed: number;
  stop: string;
}

/** Prompt tokens the scripted server was sent for the trajectory, and what they bill with prompt caching. */
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
    const sum = (f: (r: (typeof server.requests)[number]) => number) =>
      server.requests.reduce((n, r) => n + f(r), 0);
    return {
      raw: sum((r) => r.prompt_tokens),
      billed: Math.round(sum((r) => billedTokens(r.prompt_tokens, r.cached_tokens))),
      stop: result.stop_reason,
    };
  } finally {
    await server.close();
  }
}

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;

/**
 * The context policy against the full history on the same trajectory (ledger fixture: a 190 KB source
 * file, 606 tests): raw prompt tokens, and billed-equivalent tokens (uncached + 0.1 × cached).
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
    return {
      tool_calls: ledgerTrajectory().length,
      prompt_tokens_context_policy: policy.raw,
      prompt_tokens_full_history: full.raw,
      billed_tokens_context_policy: policy.billed,
      billed_tokens_full_history: full.billed,
      ratio_raw_policy_to_full: ratio(policy.raw, full.raw),
      ratio_billed_policy_to_full: ratio(policy.billed, full.billed),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
