import type { TestResult, TestStatus } from './types.js';
import { mergeResults, relativeToRoot } from './types.js';

interface Point {
  depth: number;
  names: string[];
  ok: boolean;
  directive: 'skip' | 'todo' | null;
  leaf: boolean;
  yaml: string[];
}

function status(p: Point): TestStatus {
  if (p.directive) return 'skipped';
  if (p.ok) return 'passed';
  const yaml = p.yaml.join('\n');
  // node marks assertion failures as testCodeFailure; hooks, cancellations and files that crashed
  // (an exitCode is reported) are errors rather than failed assertions.
  return /failureType:\s*'?testCodeFailure/.test(yaml) && !/^\s*exitCode:/m.test(yaml) ? 'failed' : 'error';
}

/**
 * Results of a TAP stream (node's test runner: subtests indented by four spaces). Ids join the
 * names of enclosing subtests with " > "; only leaves are reported (a suite fails because a leaf did).
 */
export function parseTap(tap: string): TestResult[] {
  const lines = tap.split(/\r?\n/);
  const stack: string[] = [];
  const children: number[] = [];
  const points: Point[] = [];
  let current: Point | null = null;
  for (const line of lines) {
    const indent = line.length - line.trimStart().length;
    const depth = Math.floor(indent / 4);
    const text = line.trim();
    if (current && indent > current.depth * 4 && !text.startsWith('# Subtest:')) {
      if (text !== '---' && text !== '...') current.yaml.push(line);
      continue;
    }
    current = null;
    const sub = /^# Subtest: (.*)$/.exec(text);
    if (sub) {
      stack[depth] = sub[1]!;
      stack.length = depth + 1;
      children[depth + 1] = 0;
      continue;
    }
    const point = /^(not ok|ok)\b\s*\d*\s*(?:- )?(.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$/i.exec(text);
    if (!point) continue;
    const name = point[2]!.replace(/\\#/g, '#');
    const names = [...stack.slice(0, depth), name].map(relativeToRoot);
    current = {
      depth,
      names,
      ok: point[1] === 'ok',
      directive: point[3] ? (point[3].toLowerCase() as 'skip' | 'todo') : null,
      leaf: !(children[depth + 1]! > 0),
      yaml: [],
    };
    points.push(current);
    children[depth] = (children[depth] ?? 0) + 1;
    children[depth + 1] = 0;
  }
  return mergeResults(
    points.filter((p) => p.leaf).map((p) => ({ id: p.names.join(' > '), status: status(p) })),
  );
}
