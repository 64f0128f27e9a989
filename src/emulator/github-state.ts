/**
 * In-memory state of the GitHub emulator: repositories, users, issues (pull requests are issues with
 * `pull` set, sharing the number sequence as on GitHub), comments and reactions. Git data lives in real
 * bare repositories; this module only keeps their location.
 */

export type Permission = 'admin' | 'maintain' | 'write' | 'triage' | 'read' | 'none';
export type UserType = 'User' | 'Bot';

export interface UserRecord {
  login: string;
  id: number;
  type: UserType;
}

export interface RepoRecord {
  id: number;
  owner: string;
  name: string;
  fullName: string;
  defaultBranch: string;
  bareDir: string;
  installationId: number;
  permissions: Map<string, Permission>;
  /** Private repositories need the installation token for fetches too. */
  private: boolean;
  /** The repository's labels by lower-cased name (GitHub matches label names case-insensitively). */
  labels: Map<string, LabelRecord>;
}

export interface LabelRecord {
  name: string;
  color: string;
  description: string | null;
}

export interface PullFields {
  head: string;
  base: string;
  draft: boolean;
  /** The head commit when its branch was deleted: GitHub keeps it (refs/pull/N/head) and still names it. */
  lastHead?: string;
}

export interface IssueRecord {
  id: number;
  repo: string;
  number: number;
  title: string;
  body: string | null;
  user: string;
  labels: string[];
  state: 'open' | 'closed';
  createdAt: string;
  updatedAt: string;
  /** Set for pull requests. */
  pull?: PullFields;
  /** Locked conversation (only collaborators may comment), with GitHub's reason if one was given. */
  locked?: { reason: LockReason | null };
}

export type LockReason = 'off-topic' | 'too heated' | 'resolved' | 'spam';

export interface CommentRecord {
  id: number;
  repo: string;
  issueNumber: number;
  body: string;
  user: string;
  createdAt: string;
  updatedAt: string;
}

export interface ReactionRecord {
  id: number;
  repo: string;
  commentId: number;
  content: string;
  user: string;
  createdAt: string;
}

export type ReviewState = 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED';

export interface ReviewRecord {
  id: number;
  repo: string;
  pullNumber: number;
  user: string;
  state: ReviewState;
  body: string;
  commitId: string;
  submittedAt: string;
}

/** An inline comment on a pull request's diff; a reply shares its thread's path, line and hunk. */
export interface ReviewCommentRecord {
  id: number;
  repo: string;
  pullNumber: number;
  reviewId: number | null;
  inReplyTo: number | null;
  user: string;
  body: string;
  path: string;
  /** The new-side line at the commit it was made on; null once the line left the diff (outdated). */
  line: number | null;
  originalLine: number;
  diffHunk: string;
  commitId: string;
  createdAt: string;
}

export interface CheckAnnotation {
  path: string;
  start_line: number;
  end_line: number;
  annotation_level: 'notice' | 'warning' | 'failure';
  message: string;
}

/** A check run of a suite on a commit, as a CI app reports it. */
export interface CheckRunRecord {
  id: number;
  suiteId: number;
  repo: string;
  name: string;
  headSha: string;
  status: 'queued' | 'in_progress' | 'completed';
  conclusion: string | null;
  output: { title: string; summary: string; text: string };
  annotations: CheckAnnotation[];
}

export interface CheckSuiteRecord {
  id: number;
  repo: string;
  app: string;
  /** Null for a push to a fork (a fork pull request's workflows), as on GitHub. */
  headBranch: string | null;
  headSha: string;
  createdAt: string;
  /** Its last run's completion (GitHub's check_suite.updated_at): the event time of check_suite.completed. */
  updatedAt: string;
}

export interface InstallationRecord {
  id: number;
  account: string;
  createdAt: string;
}

/** GitHub's timestamps have second precision. */
export const timestamp = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

export class EmulatorState {
  readonly users = new Map<string, UserRecord>();
  readonly repos = new Map<string, RepoRecord>();
  readonly installations = new Map<number, InstallationRecord>();
  readonly issues: IssueRecord[] = [];
  readonly comments: CommentRecord[] = [];
  readonly reactions: ReactionRecord[] = [];
  readonly reviews: ReviewRecord[] = [];
  readonly reviewComments: ReviewCommentRecord[] = [];
  /** Review threads (by their first comment's id) marked resolved. */
  readonly resolvedThreads = new Set<number>();
  /** Deleted issues (`repo#number`): GitHub answers 410 Gone for them, not 404. */
  readonly deletedIssues = new Set<string>();
  /** Transferred issues (`repo#number`) and where they went: GitHub redirects the issue (301), not the rest. */
  readonly movedIssues = new Map<string, { repo: string; number: number }>();
  readonly checkSuites: CheckSuiteRecord[] = [];
  readonly checkRuns: CheckRunRecord[] = [];
  /** Logins asked to review, by `repo#number`. */
  readonly reviewRequests = new Map<string, Set<string>>();
  readonly labelIds = new Map<string, number>();
  private nextId = 1000;

  constructor(readonly botLogin: string) {
    this.user(botLogin, 'Bot');
  }

  newId(): number {
    return ++this.nextId;
  }

  /** Looks a user up, registering it on first sight; `[bot]` logins are bots. */
  user(login: string, type?: UserType): UserRecord {
    let u = this.users.get(login);
    if (!u) {
      u = { login, id: this.newId(), type: type ?? (login.endsWith('[bot]') ? 'Bot' : 'User') };
      this.users.set(login, u);
    }
    return u;
  }

  labelId(name: string): number {
    let id = this.labelIds.get(name);
    if (id === undefined) this.labelIds.set(name, (id = this.newId()));
    return id;
  }

  repo(owner: string, name: string): RepoRecord | undefined {
    return this.repos.get(`${owner}/${name}`.toLowerCase());
  }

  addRepo(
    owner: string,
    name: string,
    defaultBranch: string,
    bareDir: string,
    isPrivate = false,
  ): RepoRecord {
    this.user(owner);
    const installationId = this.installationFor(owner).id;
    const repo: RepoRecord = {
      id: this.newId(),
      owner,
      name,
      fullName: `${owner}/${name}`,
      defaultBranch,
      bareDir,
      installationId,
      permissions: new Map([[owner, 'admin']]),
      private: isPrivate,
      labels: new Map(),
    };
    this.repos.set(repo.fullName.toLowerCase(), repo);
    return repo;
  }

  /** One installation per account, created when the account's first repository is. */
  private installationFor(account: string): InstallationRecord {
    for (const inst of this.installations.values()) if (inst.account === account) return inst;
    const inst = { id: this.newId(), account, createdAt: timestamp() };
    this.installations.set(inst.id, inst);
    return inst;
  }

  /** GitHub answers 'none' for users it has never seen and 'read' for everyone else on a public repo. */
  permission(repo: RepoRecord, login: string): Permission {
    return repo.permissions.get(login) ?? (this.users.has(login) ? 'read' : 'none');
  }

  issue(repo: RepoRecord, number: number): IssueRecord | undefined {
    return this.issues.find((i) => i.repo === repo.fullName && i.number === number);
  }

  createIssue(
    repo: RepoRecord,
    fields: { title: string; body?: string | null; user: string; labels?: string[]; pull?: PullFields },
  ): IssueRecord {
    this.user(fields.user);
    // As on GitHub, a deleted or transferred issue's number is never given again.
    const deleted = [...this.deletedIssues, ...this.movedIssues.keys()].filter((k) =>
      k.startsWith(`${repo.fullName}#`),
    );
    const number =
      1 +
      Math.max(
        0,
        ...this.issues.filter((i) => i.repo === repo.fullName).map((i) => i.number),
        ...deleted.map((k) => Number(k.slice(repo.fullName.length + 1))),
      );
    const now = timestamp();
    const issue: IssueRecord = {
      id: this.newId(),
      repo: repo.fullName,
      number,
      title: fields.title,
      body: fields.body ?? null,
      user: fields.user,
      labels: [...new Set(fields.labels ?? [])],
      state: 'open',
      createdAt: now,
      updatedAt: now,
      ...(fields.pull ? { pull: fields.pull } : {}),
    };
    this.issues.push(issue);
    return issue;
  }

  addComment(
    repo: RepoRecord,
    issueNumber: number,
    body: string,
    user: string,
    type?: UserType,
  ): CommentRecord {
    this.user(user, type);
    const now = timestamp();
    const comment = {
      id: this.newId(),
      repo: repo.fullName,
      issueNumber,
      body,
      user,
      createdAt: now,
      updatedAt: now,
    };
    this.comments.push(comment);
    return comment;
  }

  comment(repo: RepoRecord, id: number): CommentRecord | undefined {
    return this.comments.find((c) => c.repo === repo.fullName && c.id === id);
  }
}
