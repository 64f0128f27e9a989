import type { Worktree } from '../workspace/types.js';
import type { GitWorkspaceManager } from '../workspace/manager.js';
import type { RunContext } from './context.js';
import { judgeRunId } from './policy.js';

/** A new pull request's single repair has its judge's worktrees made ahead (when the stages can). */
export function judgeAhead(c: RunContext): JudgeAhead | null {
  const { run, s } = c;
  const prepare = s.deps.prepareJudge;
  if (run.revision !== null || !prepare) return null;
  return new JudgeAhead(s.workspaces, () =>
    prepare({
      workspaces: s.workspaces,
      remote: c.remote,
      baseCommit: run.base_commit,
      runId: judgeRunId(run.id),
    }),
  );
}

/**
 * The judge's cell worktrees, checked out while the agent works (they need only the base commit), so the
 * judge starts on its cells once the repair ends instead of on four checkouts. `begin` starts them once
 * (the agent's loop has begun: its own worktree is made, the mirror is free); the judge `take`s them;
 * `drop` removes them when no judge took them (an empty patch, a stop, a failure).
 */
export class JudgeAhead {
  private made: Promise<Worktree[] | null> | null = null;
  private taken = false;

  constructor(
    private readonly workspaces: Pick<GitWorkspaceManager, 'removeMany'>,
    private readonly make: () => Promise<Worktree[]>,
  ) {}

  begin(): void {
    // A failure is the judge's to see: it then makes its own.
    this.made ??= this.make().catch(() => null);
  }

  /** Hands the worktrees (null: none were made) to the judge, which removes them from then on. */
  readonly take = (): Promise<Worktree[] | null> => {
    this.taken = true;
    return this.made ?? Promise.resolve(null);
  };

  async drop(): Promise<void> {
    if (this.taken || !this.made) return;
    this.taken = true;
    const wts = await this.made;
    if (wts) await this.workspaces.removeMany(wts).catch(() => undefined);
  }
}
