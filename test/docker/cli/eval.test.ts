import { jest } from '@jest/globals';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { evalCommand, type EvalSummary } from '../../../src/cli/eval.js';
import { loadConfig } from '../../../src/config/config.js';
import {
  calculatorDockerfile,
  calculatorFixCalls,
  createCalculatorRepo,
} from '../../../src/demo/calculator.js';
import { scriptFromToolCalls } from '../../../src/emulator/scripted-model.js';
import { needDocker } from '../../support/docker.js';
import { describeIf } from '../../support/skip.js';

/** A test_patch that adds one hidden test file. */
function newTestFile(file: string, body: string): string {
  const lines = body.trimEnd().split('\n');
  return [
    `diff --git a/${file} b/${file}`,
    'new file mode 100644',
    '--- /dev/null',
    `+++ b/${file}`,
    `@@ -0,0 +1,${lines.length} @@`,
    ...lines.map((l) => `+${l}`),
    '',
  ].join('\n');
}

const hidden = (name: string, assertion: string) => `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { add, subtract } from '../src/calculator.js';

test('${name}', () => {
  ${assertion}
});`;

// node's TAP names top-level tests by their title alone (see src/verify/README.md).
describeIf(await needDocker())('agenticfix eval: the agent then the judge on every task, K times', () => {
  it('reports resolved per run, the mean, pass@K, tokens and time per task', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'eval-'));
    const config = loadConfig({}, dir);
    const { repo, baseCommit } = await createCalculatorRepo(dir);
    const common = {
      repo,
      base_commit: baseCommit,
      problem_statement: 'subtract(7, 2) returns -5 and divide(1, 0) does not throw',
      test_command: ['node', '--test'],
      dockerfile: calculatorDockerfile(config.sandbox.baseImage),
      PASS_TO_PASS: ['add sums two numbers'],
    };
    const tasks = [
      {
        ...common,
        instance_id: 'calc-subtract',
        test_patch: newTestFile(
          'test/hidden.test.js',
          hidden('subtract is ordered', 'assert.equal(subtract(10, 4), 6);'),
        ),
        FAIL_TO_PASS: ['subtract is ordered'],
      },
      {
        ...common,
        instance_id: 'calc-strings',
        test_patch: newTestFile(
          'test/hidden2.test.js',
          hidden('add parses numbers', "assert.equal(add('2', 3), 5);"),
        ),
        FAIL_TO_PASS: ['add parses numbers'],
      },
    ];
    const tasksFile = path.join(dir, 'tasks.jsonl');
    writeFileSync(tasksFile, tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
    const scriptFile = path.join(dir, 'script.json');
    writeFileSync(
      scriptFile,
      JSON.stringify(scriptFromToolCalls(calculatorFixCalls(), 'fixed subtract and divide')),
    );

    const saved = { ...process.env };
    Object.assign(process.env, {
      AGENTICFIX_HOME: path.join(dir, 'home'),
      AGENTICFIX_RUNS_DIR: path.join(dir, 'runs'),
    });
    const out: string[] = [];
    const write = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    let code: number;
    try {
      code = await evalCommand([
        tasksFile,
        '--model',
        `scripted:${scriptFile}`,
        '--runs',
        '2',
        '--json',
        '--out',
        path.join(dir, 'out'),
      ]);
    } finally {
      write.mockRestore();
      process.env = saved;
    }
    expect(code).toBe(0);
    const { summary, records } = JSON.parse(out.join('')) as {
      summary: EvalSummary;
      records: { instance_id: string; resolved: boolean; tokens: number }[];
    };
    expect(records.map((r) => [r.instance_id, r.resolved])).toEqual([
      ['calc-subtract', true],
      ['calc-strings', false],
      ['calc-subtract', true],
      ['calc-strings', false],
    ]);
    expect(summary).toMatchObject({
      tasks: 2,
      runs: 2,
      resolved_per_run: [1, 1],
      mean_resolved: 1,
      pass_at_k: 0.5,
    });
    expect(summary.per_task[0]!.mean_tokens).toBeGreaterThan(0);
    expect(summary.run_summaries[0]).toMatchObject({
      total_instances: 2,
      resolved_ids: ['calc-subtract'],
      unresolved_ids: ['calc-strings'],
    });
    const report = JSON.parse(
      readFileSync(path.join(dir, 'out', 'run-1', 'calc-subtract', 'report.json'), 'utf8'),
    );
    expect(report.task.resolved).toBe(true);
  });
});
