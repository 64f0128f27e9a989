import { usd } from '../config/prices.js';
import { withMarker } from '../trace/marker.js';
import { editComment, isRefusal, postComment, type GitHub, type IssueRef } from './github.js';

/** The one status comment per run, edited in place; edits are rate-limited and the last state always lands. */

const PHASES = [
  'queued',
  'preparing_workspace',
  'building_environment',
  'working',
  'verifying',
  'done',
] as const;
export type Phase = (typeof PHASES)[number];
export type Ending =
  'failed' | 'cancelled' | 'superseded' | 'interrupted' | 'infra_error' | 'publish_pending';

export interface StatusState {
  phase: Phase | Ending;
  step?: number;
  tokensUsed?: number;
  tokenBudget?: number;
  /** USD spent (null: the model has no price) and the run's cost limit (null: none). */
  costUsd?: number | null;
  costBudget?: number | null;
  /** Tokens and cost include estimates: a reply came without usage. */
  estimated?: boolean;
  lastTest?: string | null;
  /** One line shown under the checklist (the verdict, the error, who cancelled, …). */
  detail?: string;
  links?: { label: string; url: string }[];
}

const LABEL: Record<Phase, string> = {
  queued: 'Queued',
  preparing_workspace: 'Preparing workspace',
  building_environment: 'Building environment',
  working: 'Working',
  verifying: 'Verifying',
  done: 'Done',
};
const ENDING: Record<Ending, string> = {
  failed: '❌ Failed',
  cancelled: '⏹️ Cancelled',
  superseded: '⏭️ Superseded',
  interrupted: '⚠️ Interrupted',
  // The judge could not run (the engine, git): no verdict on the patch, so not "Done".
  infra_error: '⚠️ Infrastructure error',
  publish_pending: '⏳ Publishing pending',
};

/** A run's page on serve (src/web) when AGENTICFIX_PUBLIC_URL says where people reach it, else null. */
export const runPageUrl = (publicUrl: string | null, runId: string): string | null =>
  publicUrl ? `${publicUrl}/runs/${encodeURIComponent(runId)}` : null;

/** `page`: the run's page, linked from the run's id. */
export function renderStatus(
  runId: string,
  baseCommit: string,
  s: StatusState,
  page?: string | null,
): string {
  const ended = !(PHASES as readonly string[]).includes(s.phase);
  const current = ended ? -1 : PHASES.indexOf(s.phase as Phase);
  const title = ended
    ? ENDING[s.phase as Ending]
    : s.phase === 'done'
      ? '✅ Done'
      : `⏳ ${LABEL[s.phase as Phase]}`;
  const list = PHASES.map((p, i) => {
    const mark = s.phase === 'done' || i < current ? 'x' : ' ';
    let line = `- [${mark}] ${LABEL[p]}`;
    if (p === 'working' && s.step !== undefined) {
      line += `: step ${s.step}, ${s.tokensUsed ?? 0} of ${s.tokenBudget ?? '?'} tokens`;
      if (s.costUsd !== undefined)
        line +=
          s.costBudget != null ? `, ${usd(s.costUsd)} of ${usd(s.costBudget)}` : `, cost ${usd(s.costUsd)}`;
      if (s.estimated) line += ' (estimated: the model service sent no usage)';
      if (s.lastTest) line += `, last test run: ${s.lastTest}`;
    }
    return i === current ? `${line} ⬅️` : line;
  });
  const links = (s.links ?? []).map((l) => `[${l.label}](${l.url})`).join(' · ');
  const text = [
    `### AgenticFix: ${title}`,
    list.join('\n'),
    s.detail ?? '',
    links,
    `<sub>Run ${page ? `[\`${runId}\`](${page})` : `\`${runId}\``} · base commit \`${baseCommit.slice(0, 12)}\` · updated ${new Date().toISOString()} · comment \`/agenticfix help\` for commands</sub>`,
  ]
    .filter(Boolean)
    .join('\n\n');
  return withMarker(text, { run: runId, kind: 'status' });
}

export interface StatusCommentOptions {
  gh: () => Promise<GitHub>;
  ref: IssueRef;
  runId: string;
  baseCommit: string;
  intervalMs: number;
  commentId?: number | null;
  onCreated?: (commentId: number) => void | Promise<void>;
  onError?: (err: unknown) => void;
  /** The run's page (runPageUrl), linked from the comment. */
  page?: string | null;
  /** Every state given, written or not (the run page's status history). */
  onState?: (state: StatusState) => void;
  /**
   * Another process may have posted the comment and died before its id was recorded (a restart, a
   * worker taking a run whose announcement failed): its marker is looked for before the first POST.
   */
  inherited?: boolean;
}

export class StatusComment {
  private latest: StatusState | null = null;
  private written: StatusState | null = null;
  private lastWrite = 0;
  private timer: NodeJS.Timeout | null = null;
  private queued = false; // a write is in the chain and has not started yet
  private chain: Promise<void> = Promise.resolve();
  private commentId: number | null;
  /** GitHub refused a write for good (the issue locked, deleted or transferred): no more are sent. */
  private refused = false;
  /** A POST of the comment failed: it may have landed, so the next one looks for it first. */
  private postFailed = false;

  constructor(private readonly o: StatusCommentOptions) {
    this.commentId = o.commentId ?? null;
    this.postFailed = this.commentId === null && o.inherited === true;
  }

  /** Records the state; writes now, or later (trailing edit) when the last write was too recent. */
  update(state: StatusState): void {
    this.latest = state;
    this.o.onState?.(state);
    if (this.timer || this.queued) return; // the scheduled write will pick this state up
    const wait = this.lastWrite === 0 ? 0 : this.lastWrite + this.o.intervalMs - Date.now();
    if (wait <= 0) this.enqueueWrite();
    else this.timer = setTimeout(() => this.enqueueWrite(), wait);
  }

  /** Writes `state` as soon as earlier writes finish, whatever the interval; resolves with whether it landed. */
  async final(state: StatusState): Promise<boolean> {
    this.latest = state;
    this.o.onState?.(state);
    if (!this.queued) this.enqueueWrite();
    await this.chain;
    return this.written === state;
  }

  /** The comment's id, once it was posted. */
  get id(): number | null {
    return this.commentId;
  }

  /** Resolves once every scheduled write (including a pending trailing one) has landed. */
  async settled(): Promise<void> {
    if (this.timer && !this.queued) this.enqueueWrite();
    await this.chain;
  }

  private enqueueWrite(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queued = true;
    this.chain = this.chain.then(() => this.write());
  }

  private async write(): Promise<void> {
    this.queued = false;
    const state = this.latest;
    if (!state || state === this.written || this.refused) return;
    this.written = state;
    this.lastWrite = Date.now();
    const body = renderStatus(this.o.runId, this.o.baseCommit, state, this.o.page);
    try {
      const gh = await this.o.gh();
      if (this.commentId === null) {
        const look = this.postFailed;
        this.postFailed = true; // until its id is known
        this.commentId = await postComment(gh, this.o.ref, body, { look });
        this.postFailed = false;
        await this.o.onCreated?.(this.commentId);
      } else {
        await editComment(gh, this.o.ref, this.commentId, body);
      }
    } catch (e) {
      // Progress display must never fail the run; the next state will try again, unless GitHub
      // refused for good.
      this.written = null;
      this.refused = isRefusal(e);
      this.o.onError?.(e);
    }
  }
}
