import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../config/config.js';
import {
  CALCULATOR_ISSUE,
  CALCULATOR_TEST_ARGV,
  calculatorFixCalls,
  createCalculatorRepo,
} from '../demo/calculator.js';
import { scriptFromToolCalls, startScriptedModelServer } from '../emulator/scripted-model.js';
import { parseIssueMarkdown } from '../cli/run.js';
import { runRepair } from '../pipeline/repair.js';

/**
 * A fixed 20-call trajectory on the calculator: explore, reproduce, fix in two edits, re-test, review.
 * It reads the same files repeatedly on purpose, as models do.
 */
export function benchTrajectory(): { name: string; arguments: Record<string, unknown> }[] {
  const [readSource, fixSubtract, fixDivide] = calculatorFixCalls();
  const read = (p: string, extra: Record<string, unknown> = {}) => ({
    name: 'read_file',
    arguments: { path: p, ...extra },
  });
  const search = (query: string) => ({ name: 'search_code', arguments: { query } });
  const tests = { name: 'run_tests', arguments: {} };
  const diff = { name: 'git_diff', arguments: {} };
  return [
    { name: 'list_files', arguments: {} },
    read('package.json'),
    read('ISSUE.md'),
    read('test/calculator.test.js'),
    readSource!,
    search('subtract'),
    search('divide'),
    tests,
    fixSubtract!,
    tests,
    read('src/calculator.js'),
    fixDivide!,
    tests,
    diff,
    read('test/calculator.test.js', { start_line: 15 }),
    search('RangeError'),
    { name: 'list_files', arguments: { path: 'src' } },
    read('src/calculator.js'),
    tests,
    diff,
  ];
}

async function promptTokens(
  config: Config,
  repo: string,
  baseCommit: string,
): Promise<{ tokens: number; stop: string }> {
  const script = scriptFromToolCalls(
    benchTrajectory(),
    'Fixed subtract (operand order) and divide (throws on zero).',
  );
  const server = await startScriptedModelServer(script);
  try {
    const result = await runRepair({
      config,
      remote: repo,
      baseCommit,
      issue: parseIssueMarkdown(CALCULATOR_ISSUE),
      testArgv: CALCULATOR_TEST_ARGV,
      model: { kind: 'url', baseUrl: server.url, name: 'bench' },
      sandbox: 'local',
    });
    return { tokens: server.requests.reduce((n, r) => n + r.prompt_tokens, 0), stop: result.stop_reason };
  } finally {
    await server.close();
  }
}

/** Prompt tokens the scripted server was sent for the same trajectory, with the context policy and with the full history. */
export async function benchContext(): Promise<Record<string, number>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'agenticfix-bench-context-'));
  try {
    const { repo, baseCommit } = await createCalculatorRepo(dir);
    const env = { AGENTICFIX_HOME: path.join(dir, 'home'), AGENTICFIX_RUNS_DIR: path.join(dir, 'runs') };
    const policy = await promptTokens(loadConfig(env, dir), repo, baseCommit);
    const full = await promptTokens(
      loadConfig({ ...env, AGENTICFIX_CONTEXT_POLICY: 'false' }, dir),
      repo,
      baseCommit,
    );
    for (const r of [policy, full])
      if (r.stop !== 'completed') throw new Error(`bench trajectory ended with ${r.stop}`);
    return {
      tool_calls: benchTrajectory().length,
      prompt_tokens_context_policy: policy.tokens,
      prompt_tokens_full_history: full.tokens,
      ratio_policy_to_full: Math.round((policy.tokens / full.tokens) * 1000) / 1000,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
