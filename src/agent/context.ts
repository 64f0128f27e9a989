import type { Config } from '../config/config.js';
import { renderObservation } from '../tools/observation.js';
import type { TestSummary } from '../testrunners/summary.js';
import type { lastTestState } from '../tools/registry.js';
import type { ToolResult } from '../tools/types.js';
import type { ChatMessage, RawToolCall } from './model.js';
import { estimateTokens } from './tokens.js';
import {
  asShown,
  excerpt,
  linesAround,
  searchHits,
  shownLines,
  type Excerpt,
  type ShownLines,
} from './context-lines.js';

export type ContextParams = Config['context'] & Pick<Config['limits'], 'observationMaxChars'>;

interface Observation {
  callId: string;
  tool: string;
  args: unknown;
  text: string;
  outcome: string;
  paths: string[];
  mutating: boolean;
  stale: boolean;
  /** What the stub keeps of the result (KEPT). */
  kept: Record<string, unknown>;
  /** A read's lines, as shown. */
  shown: ShownLines | null;
  /** Lines of compacted reads a search showed again around its matches. */
  again: Excerpt[];
  /** Set once, when compaction replaced the observation; never rewritten afterwards. */
  stub: string | null;
}

/** What one compaction did, for the trace. */
export interface Compaction {
  observations: number;
  tokens_before: number;
  tokens_after: number;
}

type Entry =
  | { kind: 'assistant'; content: string | null; tool_calls: RawToolCall[] }
  | { kind: 'observation'; obs: Observation }
  | { kind: 'note'; content: string };

/** The short structured summary sent every turn, so elided history does not mean forgotten progress. */
export interface WorkingState {
  steps: number;
  files_edited: string[];
  tried: string[];
  /** Older entries the window no longer shows. */
  tried_omitted: number;
  /** Errors not yet followed by a successful call of the same kind (same tool, same paths). */
  failed: string[];
  failed_omitted: number;
  /** The registry's record of the last run_tests of the agent's work (lastTestState), never another tool's result. */
  last_test: ReturnType<typeof lastTestState>;
  /** What is left of the run's budgets when this state was written (null where the run has none). */
  budget_left: {
    tokens: number;
    requests: number;
    tool_calls: number;
    time_s: number;
    cost_usd?: number;
  } | null;
}

/** The parts of the working state that live outside the context: the last test and the budget. */
export type LiveState = Pick<WorkingState, 'last_test' | 'budget_left'>;

/** Fields of a successful result its stub keeps: what the next call needs (edit_file needs `version`). */
const KEPT: Record<string, readonly string[]> = {
  read_file: ['path', 'start_line', 'end_line', 'total_lines', 'version'],
  // The file's version after the change: the next edit of it needs it.
  edit_file: ['version'],
  create_file: ['version'],
};

function keptOf(tool: string, result: ToolResult): Record<string, unknown> {
  const data = result.data as Record<string, unknown> | null;
  if (!result.success || !data) return {};
  return Object.fromEntries((KEPT[tool] ?? []).filter((k) => k in data).map((k) => [k, data[k]]));
}

const TRIED_KEEP = 12;
/** Steps at least between two working states in the history (each is paid for uncached once, then carried). */
const STATE_EVERY_STEPS = 8;
const FAILED_KEEP = 6;
const PATH_KEYS = ['path', 'file', 'paths', 'files'];

/** File paths named in a call's arguments (by the common argument names). */
function argPaths(args: unknown): string[] {
  if (!args || typeof args !== 'object') return [];
  return PATH_KEYS.flatMap((k) => (args as Record<string, unknown>)[k] ?? []).filter(
    (p): p is string => typeof p === 'string',
  );
}

/** One line naming a call: `read_file path=src/a.js start=1`, long values shortened, file versions left out. */
function describeCall(tool: string, args: unknown): string {
  if (!args || typeof args !== 'object') return tool;
  const entries = Object.entries(args as Record<string, unknown>).filter(([k]) => k !== 'version');
  const parts = entries.map(([k, v]) => {
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    return `${k}=${s.length > 40 ? `${s.slice(0, 37)}...` : s}`;
  });
  return [tool, ...parts].join(' ').replace(/\s+/g, ' ');
}

/**
 * A compacted observation: valid JSON naming the call, its outcome, how much was cut and how to get it
 * back (a change's result is in git_diff; anything else by the same call). Kept short because every
 * later request carries it: an argument the kept fields give with its value is named once (a read's
 * path and lines, which also say how to make the same call), and `stale` only when true.
 */
function stubOf(o: Observation, headLines: number): string {
  const args =
    o.args && typeof o.args === 'object'
      ? Object.fromEntries(Object.entries(o.args).filter(([k, v]) => o.kept[k] !== v))
      : o.args;
  return JSON.stringify({
    compacted: describeCall(o.tool, args),
    outcome: o.outcome,
    cut_tokens: estimateTokens(o.text),
    ...o.kept,
    ...(o.stale ? { stale: true } : {}),
    // A file's first lines (imports, module header): what code written next to it copies, read again most.
    // Frozen with the stub like the rest: the kept version tells the model when the file changed since.
    ...(o.shown?.start === 1 && headLines > 0 && !o.stale
      ? { head: excerpt(o.shown, 1, headLines)!.content }
      : {}),
    // A failed change changed nothing: there is nothing to get back.
    restore: !o.mutating ? 'same call' : o.outcome === 'ok' ? 'git_diff shows the change' : undefined,
  });
}

/** What stubbing saves each later request. */
const saving = (o: Observation, headLines: number): number =>
  estimateTokens(o.text) - estimateTokens(stubOf(o, headLines));

/** Windows around a search's matches shown again, at most this many per search. */
const AGAIN_WINDOWS = 3;

/** What a call came to, in a few words: `ok`, the error code, or a test run's counts (`2 failed, 727 passed`). */
export function outcomeOf(result: ToolResult): string {
  if (!result.success) return result.error_code ?? 'failed';
  const data = result.data as Record<string, unknown> | null;
  if (!data || typeof data.status !== 'string' || !('exit_code' in data)) return 'ok';
  const sum = data.summary as TestSummary | null | undefined;
  if (!sum) return `${data.status} (exit code ${String(data.exit_code)})`;
  const counts = [
    [sum.failed, 'failed'],
    [sum.errors, sum.errors === 1 ? 'error' : 'errors'],
    [sum.passed, 'passed'],
    [sum.skipped, 'skipped'],
  ] as const;
  const text = counts.filter(([n, name]) => n > 0 || name === 'passed').map(([n, name]) => `${n} ${name}`);
  return text.join(', ');
}

/**
 * The context policy: what the model sees each turn, shaped for providers that cache the repeated
 * prompt prefix and bill it at about a tenth. The history is append-only between compactions, so each
 * request extends the previous one. Once the whole observations older than the newest
 * `keepFullObservations` add up to `compactTokens`, they are all replaced at once by small JSON stubs
 * (frozen from then on, with a `stale` mark when the file changed since), and the working state is
 * put right after them. A compaction rewrites only the tail, so what came before stays cached; the
 * tail is short when compactions come early and often (the default threshold is low). Small results
 * stay whole (`stubMinSavingTokens`), and so do windows of a file read since its last change
 * (`readWindowMaxTokens`), so that the model need not fetch them again, until they add up to
 * `smallWholeMaxTokens`. Stubs that would hide what a later call needs carry it: a compacted page that
 * began at line 1 keeps the file's head (`stubHeadLines`), and a search whose matches lie in a compacted
 * read shows the lines around them again (`searchAroundLines`), kept whole like a window, so that the
 * model need not spend a turn reading them. The context benchmark (src/bench/context.ts) measures what this bills
 * against the full history, the floor under any such policy, and the re-reads it forces.
 * With the policy disabled the full history is sent (observations still capped): the benchmark baseline.
 */
export class ContextManager {
  private readonly entries: Entry[] = [];
  private readonly s: Omit<WorkingState, keyof LiveState> = {
    steps: 0,
    files_edited: [],
    tried: [],
    tried_omitted: 0,
    failed: [],
    failed_omitted: 0,
  };
  /** `state.failed` with the kind (tool and paths) of each entry. */
  private failures: { kind: string; text: string }[] = [];
  /** The step of the last working state appended (the first compaction always appends one). */
  private stateAt = -Infinity;

  constructor(
    private readonly params: ContextParams,
    private readonly system: string,
    private readonly task: string,
    private readonly live: () => LiveState = () => ({ last_test: null, budget_left: null }),
  ) {}

  get state(): WorkingState {
    return { ...this.s, ...this.live() };
  }

  /** The state as the model is sent it: without `tried`, since the stubs above name every call and its outcome. */
  private modelState(): Omit<WorkingState, 'tried' | 'tried_omitted'> {
    const { tried: _tried, tried_omitted: _omitted, ...rest } = this.state;
    return rest;
  }

  addAssistant(message: { content: string | null; tool_calls: RawToolCall[] }): void {
    this.entries.push({ kind: 'assistant', ...message });
    this.s.steps++;
  }

  addNote(content: string): void {
    this.entries.push({ kind: 'note', content });
  }

  /** Records a tool's result as the answer to one call; returns the observation text the model will see. */
  addObservation(callId: string, tool: string, args: unknown, result: ToolResult, mutating: boolean): string {
    const again = this.linesAgain(tool, result);
    const shown = again.length
      ? {
          ...result,
          data: {
            ...(result.data as object),
            // After the matches: what the model asked for comes first.
            around_matches: {
              from: 'your earlier read_file results, compacted since; the file is unchanged',
              lines: again,
            },
          },
        }
      : result;
    const text = renderObservation(shown, this.params.observationMaxChars);
    const paths = argPaths(args);
    if (mutating && result.success) this.markStale(paths);
    this.entries.push({
      kind: 'observation',
      obs: {
        callId,
        tool,
        args,
        text,
        outcome: outcomeOf(result),
        // A search that showed lines again goes stale with their file.
        paths: [...paths, ...again.map((e) => e.path)],
        mutating,
        stale: false,
        kept: keptOf(tool, result),
        shown: this.params.enabled ? shownLines(tool, result) : null,
        again,
        stub: null,
      },
    });
    this.updateState(tool, args, result, mutating, paths);
    return text;
  }

  /**
   * Stubs the older whole observations when they have grown past the threshold, and puts the
   * working state right after them. Call before each request; returns what was done, or null.
   */
  compact(): Compaction | null {
    if (!this.params.enabled) return null;
    const whole = this.entries.flatMap((e) => (e.kind === 'observation' && !e.obs.stub ? [e.obs] : []));
    const candidates = whole.slice(0, Math.max(0, whole.length - this.params.keepFullObservations));
    // A result whose stub saves little stays whole: carrying it costs a tenth of its size a request,
    // fetching it again a whole turn. So does a current window of a file. Once such results add up past
    // their cap they go in one batch (one rewrite of what follows the first of them, not one per request).
    const head = this.params.stubHeadLines;
    const shrinks = candidates.filter((o) => saving(o, head) > 0);
    const small = shrinks.filter(
      (o) => saving(o, head) < this.params.stubMinSavingTokens || this.isWindow(o),
    );
    const smallTokens = small.reduce((n, o) => n + estimateTokens(o.text), 0);
    const older =
      smallTokens > this.params.smallWholeMaxTokens ? shrinks : shrinks.filter((o) => !small.includes(o));
    const before = older.reduce((n, o) => n + estimateTokens(o.text), 0);
    if (older.length === 0 || before < this.params.compactTokens) return null;
    for (const o of older) o.stub = stubOf(o, head);
    if (this.state.steps - this.stateAt >= STATE_EVERY_STEPS) {
      this.stateAt = this.state.steps;
      // Before the turn of the observations kept whole: the next compaction rewrites from those, and a
      // state placed after them would be paid for uncached a second time.
      const lastStub = this.entries.findIndex((e) => e.kind === 'observation' && e.obs === older.at(-1));
      const nextTurn = this.entries.findIndex((e, i) => i > lastStub && e.kind === 'assistant');
      this.entries.splice(nextTurn === -1 ? this.entries.length : nextTurn, 0, {
        kind: 'note',
        content: `Working state (kept by the host):\n${JSON.stringify(this.modelState())}`,
      });
    }
    const after = older.reduce((n, o) => n + estimateTokens(o.stub!), 0);
    return { observations: older.length, tokens_before: before, tokens_after: after };
  }

  /**
   * A current window of a file (a read of at most `readWindowMaxTokens`, the file unchanged since): the
   * code the model works on, which it reads again when it sees only a stub. Kept whole like a small result.
   */
  private isWindow(o: Observation): boolean {
    return (
      (o.tool === 'read_file' || o.again.length > 0) &&
      o.outcome === 'ok' &&
      !o.stale &&
      estimateTokens(o.text) <= this.params.readWindowMaxTokens
    );
  }

  /**
   * For a search, the lines around its matches that the model saw in a read it now sees only as a stub
   * (the file unchanged since), and in no whole read or earlier window (a stub's head shows too few
   * lines past a match): the code it searched for is what it works on next, and without them it would
   * spend a turn reading them again.
   */
  private linesAgain(tool: string, result: ToolResult): Excerpt[] {
    const around = this.params.searchAroundLines;
    const hits = searchHits(tool, result);
    if (!this.params.enabled || around === 0 || hits.length === 0) return [];
    const current = this.entries.flatMap((e) => (e.kind === 'observation' && !e.obs.stale ? [e.obs] : []));
    const lost = current.flatMap((o) => (o.stub && o.shown ? [o.shown] : []));
    const seen = current.flatMap((o) =>
      o.stub ? [] : [...(o.shown ? [o.shown] : []), ...o.again.map(asShown)],
    );
    return linesAround(hits, lost, seen, around, AGAIN_WINDOWS * (2 * around + 1));
  }

  messages(): ChatMessage[] {
    const out: ChatMessage[] = [
      { role: 'system', content: this.system },
      { role: 'user', content: this.task },
    ];
    for (const e of this.entries) {
      if (e.kind === 'assistant') {
        // Services reject an assistant turn with neither content nor tool calls.
        if (e.tool_calls.length)
          out.push({ role: 'assistant', content: e.content, tool_calls: e.tool_calls });
        else out.push({ role: 'assistant', content: e.content ?? '' });
      } else if (e.kind === 'note') {
        out.push({ role: 'user', content: e.content });
      } else {
        out.push({ role: 'tool', tool_call_id: e.obs.callId, content: e.obs.stub ?? e.obs.text });
      }
    }
    return out;
  }

  /** Reads of the edited paths (or of anything, when the edit names no path) no longer show the file. */
  private markStale(edited: string[]): void {
    for (const e of this.entries) {
      if (e.kind !== 'observation' || e.obs.paths.length === 0) continue;
      if (edited.length === 0 || e.obs.paths.some((p) => edited.includes(p))) e.obs.stale = true;
    }
  }

  private updateState(
    tool: string,
    args: unknown,
    result: ToolResult,
    mutating: boolean,
    paths: string[],
  ): void {
    const s = this.s;
    const call = describeCall(tool, args);
    s.tried.push(`${call} → ${outcomeOf(result)}`);
    s.tried_omitted += Math.max(0, s.tried.length - TRIED_KEEP);
    s.tried = s.tried.slice(-TRIED_KEEP);
    const kind = JSON.stringify([tool, [...paths].sort()]);
    if (result.success) {
      // A later success of the same kind settles the earlier errors (a rebuild fixed the sandbox).
      this.failures = this.failures.filter((f) => f.kind !== kind);
    } else {
      this.failures.push({ kind, text: `${call}: ${result.error ?? result.error_code}` });
      s.failed_omitted += Math.max(0, this.failures.length - FAILED_KEEP);
      this.failures = this.failures.slice(-FAILED_KEEP);
    }
    s.failed = this.failures.map((f) => f.text);
    if (mutating && result.success) s.files_edited = [...new Set([...s.files_edited, ...paths])];
  }
}
