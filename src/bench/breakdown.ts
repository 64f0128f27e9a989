import { readFileSync } from 'node:fs';
import { VerificationReportSchema } from '../verify/types.js';

interface Event {
  ts: string;
  type: string;
  name?: string;
  duration_ms?: number;
}

/**
 * Where a run's wall time from the label to its end goes, in ms per named part, from its record alone:
 * the repair's trace (its step events, tool_end durations, stop), result.json, and the judge's report
 * (its start, its duration and phases). `tests` is the time in test runs (the agent's run_tests and the
 * judge's cells); every other part is time outside tests:
 * - pickup: the label to the repair's first event (webhook, intake, queue, the run's preparation);
 * - workspace: the worktree and the repository's guidance; environment_setup: the base images looked up;
 * - environment_build: build_environment calls (a cached image still starts the run's container and
 *   reads its runtime versions); other_tools: the remaining tool calls; model: the agent's time between
 *   tool calls (model requests, context upkeep);
 * - release: the loop's stop to the patch's export (the model client closed, the run's container removed);
 * - record: the patch exported, the worktree given back, result.json written;
 * - handoff: the repair's end to the judge's start; judge_setup: the judge outside its cells;
 * - publish: the judge's end to the run's end (push, pull request, comments, the last status edit).
 */
export function wallBreakdown(o: {
  labelledAt: number;
  wallMs: number;
  eventsPath: string;
  resultPath: string;
  reportPath: string;
}): Record<string, number> {
  const events = readFileSync(o.eventsPath, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Event);
  const at = (e: Event | undefined) => (e ? Date.parse(e.ts) : NaN);
  const step = (name: string) => events.find((e) => e.type === 'step' && e.name === name);
  const tools = events.filter((e) => e.type === 'tool_end');
  const toolMs = (pick: (name: string) => boolean) =>
    tools.filter((e) => pick(e.name ?? '')).reduce((sum, e) => sum + (e.duration_ms ?? 0), 0);
  const result = JSON.parse(readFileSync(o.resultPath, 'utf8')) as { finished_at: string };
  const report = VerificationReportSchema.parse(JSON.parse(readFileSync(o.reportPath, 'utf8')));
  const stop = events.findLast((e) => e.type === 'stop');
  const repairEnd = Date.parse(result.finished_at);
  const judgeStart = Date.parse(report.started_at);
  const judgeEnd = judgeStart + report.duration_ms;
  const cellsMs = report.phases?.cells_ms ?? 0;
  const agentMs = at(stop) - at(step('agent'));
  const tests = toolMs((n) => n === 'run_tests');
  const build = toolMs((n) => n === 'build_environment');
  const other = toolMs((n) => n !== 'run_tests' && n !== 'build_environment');
  return {
    tests: tests + cellsMs,
    pickup: at(events[0]) - o.labelledAt,
    workspace: at(step('environment')) - at(step('workspace')),
    environment_setup: at(step('agent')) - at(step('environment')),
    environment_build: build,
    other_tools: other,
    model: agentMs - tests - build - other,
    release: at(step('patch_and_cleanup')) - at(stop),
    record: repairEnd - at(step('patch_and_cleanup')),
    handoff: judgeStart - repairEnd,
    judge_setup: report.duration_ms - cellsMs,
    publish: o.labelledAt + o.wallMs - judgeEnd,
  };
}
