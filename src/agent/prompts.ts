import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sha256 } from '../trace/trace.js';
import type { IssueText } from '../pipeline/types.js';

/** prompts/ at the package root; the same relative path from src/agent and dist/agent. */
const PROMPTS_DIR = fileURLToPath(new URL('../../prompts/', import.meta.url));

export interface Prompts {
  system: string;
  task: string;
  /** sha256 over both templates: recorded in every run so results can be tied to the exact prompt text. */
  hash: string;
}

export function loadPrompts(dir = PROMPTS_DIR): Prompts {
  const system = readFileSync(`${dir}/system.md`, 'utf8');
  const task = readFileSync(`${dir}/task.md`, 'utf8');
  return { system, task, hash: sha256(`${system}\0${task}`) };
}

const MARKER = /<\/?\s*untrusted_issue\s*>/gi;

/** Wraps issue text between markers the issue itself cannot close (markers inside it are defused). */
export function wrapIssue(issue: IssueText): string {
  const clean = (s: string) => s.replace(MARKER, '[marker removed]');
  const number = issue.number === undefined ? '' : ` #${issue.number}`;
  return `<untrusted_issue>\nIssue${number}: ${clean(issue.title)}\n\n${clean(issue.body)}\n</untrusted_issue>`;
}

export function renderTask(
  template: string,
  vars: { issue: IssueText; baseCommit: string; testArgv: readonly string[]; environment: string },
): string {
  const values: Record<string, string> = {
    issue: wrapIssue(vars.issue),
    base_commit: vars.baseCommit,
    test_command: JSON.stringify(vars.testArgv),
    environment: vars.environment,
  };
  // One pass, so placeholders that appear inside the issue text are never expanded.
  return template.replace(/\{\{(\w+)\}\}/g, (all, key: string) => values[key] ?? all);
}
