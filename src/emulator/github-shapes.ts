/**
 * GitHub's JSON shapes for the emulator's records, shared by the REST routes and webhook payloads.
 * Only the fields clients commonly read are rendered, with GitHub's names and types.
 */
import { branchExists, diffHunk, resolveCommit } from './github-git.js';
import type {
  CheckRunRecord,
  CheckSuiteRecord,
  CommentRecord,
  EmulatorState,
  IssueRecord,
  ReactionRecord,
  RepoRecord,
  ReviewCommentRecord,
  ReviewRecord,
} from './github-state.js';

export type Json = Record<string, unknown>;

/** The emulator does not keep when a repository was created or pushed to. */
const EPOCH = '2020-01-01T00:00:00Z';

/** The URL templates GitHub renders in every repository, after the repository's API URL. */
const REPO_URLS = {
  archive_url: '/{archive_format}{/ref}',
  assignees_url: '/assignees{/user}',
  blobs_url: '/git/blobs{/sha}',
  branches_url: '/branches{/branch}',
  collaborators_url: '/collaborators{/collaborator}',
  comments_url: '/comments{/number}',
  commits_url: '/commits{/sha}',
  compare_url: '/compare/{base}...{head}',
  contents_url: '/contents/{+path}',
  contributors_url: '/contributors',
  deployments_url: '/deployments',
  downloads_url: '/downloads',
  events_url: '/events',
  forks_url: '/forks',
  git_commits_url: '/git/commits{/sha}',
  git_refs_url: '/git/refs{/sha}',
  git_tags_url: '/git/tags{/sha}',
  hooks_url: '/hooks',
  issue_comment_url: '/issues/comments{/number}',
  issue_events_url: '/issues/events{/number}',
  issues_url: '/issues{/number}',
  keys_url: '/keys{/key_id}',
  labels_url: '/labels{/name}',
  languages_url: '/languages',
  merges_url: '/merges',
  milestones_url: '/milestones{/number}',
  notifications_url: '/notifications{?since,all,participating}',
  pulls_url: '/pulls{/number}',
  releases_url: '/releases{/id}',
  stargazers_url: '/stargazers',
  statuses_url: '/statuses/{sha}',
  subscribers_url: '/subscribers',
  subscription_url: '/subscription',
  tags_url: '/tags',
  teams_url: '/teams',
  trees_url: '/git/trees{/sha}',
};

export class Shapes {
  constructor(
    private readonly state: EmulatorState,
    private readonly baseUrl: () => string,
  ) {}

  private api(p: string): string {
    return `${this.baseUrl()}${p}`;
  }

  user(login: string): Json {
    const u = this.state.user(login);
    const url = this.api(`/users/${encodeURIComponent(u.login)}`);
    return {
      login: u.login,
      id: u.id,
      node_id: `U_${u.id}`,
      avatar_url: this.api(`/avatars/u/${u.id}`),
      gravatar_id: '',
      type: u.type,
      site_admin: false,
      url,
      html_url: this.api(`/${encodeURIComponent(u.login)}`),
      followers_url: `${url}/followers`,
      following_url: `${url}/following{/other_user}`,
      gists_url: `${url}/gists{/gist_id}`,
      starred_url: `${url}/starred{/owner}{/repo}`,
      subscriptions_url: `${url}/subscriptions`,
      organizations_url: `${url}/orgs`,
      repos_url: `${url}/repos`,
      events_url: `${url}/events{/privacy}`,
      received_events_url: `${url}/received_events`,
    };
  }

  /** GET /user with a user's token: GitHub's private-user, the account as its owner sees it. */
  authenticatedUser(login: string): Json {
    const at = new Date(0).toISOString();
    return {
      ...(this.user(login) as Record<string, unknown>),
      ...{ name: null, company: null, blog: '', location: null, email: null, hireable: null, bio: null },
      ...{ public_repos: 0, public_gists: 0, followers: 0, following: 0, created_at: at, updated_at: at },
      ...{
        private_gists: 0,
        total_private_repos: 0,
        owned_private_repos: 0,
        disk_usage: 0,
        collaborators: 0,
      },
      two_factor_authentication: false,
    };
  }

  repo(repo: RepoRecord): Json {
    const url = this.api(`/repos/${repo.fullName}`);
    const html = this.api(`/${repo.fullName}`);
    const open = this.state.issues.filter((i) => i.repo === repo.fullName && i.state === 'open').length;
    return {
      id: repo.id,
      node_id: `R_${repo.id}`,
      name: repo.name,
      full_name: repo.fullName,
      owner: this.user(repo.owner),
      private: repo.private,
      visibility: repo.private ? 'private' : 'public',
      description: null,
      fork: false,
      archived: false,
      disabled: false,
      default_branch: repo.defaultBranch,
      url,
      html_url: html,
      clone_url: this.cloneUrl(repo),
      git_url: `git:${html.replace(/^https?:/, '')}.git`,
      ssh_url: `git@emulator:${repo.fullName}.git`,
      svn_url: html,
      mirror_url: null,
      homepage: null,
      language: null,
      license: null,
      size: 0,
      forks: 0,
      forks_count: 0,
      stargazers_count: 0,
      watchers: 0,
      watchers_count: 0,
      open_issues: open,
      open_issues_count: open,
      has_issues: true,
      has_projects: false,
      has_wiki: false,
      has_pages: false,
      has_downloads: false,
      has_discussions: false,
      network_count: 0,
      subscribers_count: 0,
      created_at: EPOCH,
      updated_at: EPOCH,
      pushed_at: EPOCH,
      permissions: { admin: false, maintain: false, push: true, triage: true, pull: true },
      ...Object.fromEntries(Object.entries(REPO_URLS).map(([key, suffix]) => [key, `${url}${suffix}`])),
    };
  }

  cloneUrl(repo: RepoRecord): string {
    return this.api(`/git/${repo.fullName}.git`);
  }

  /** A label as GitHub renders it: the repository's own definition, or a plain one for a name it lacks. */
  label(repo: RepoRecord, name: string): Json {
    const id = this.state.labelId(name);
    const def = repo.labels.get(name.toLowerCase());
    return {
      id,
      node_id: `LA_${id}`,
      url: this.api(`/repos/${repo.fullName}/labels/${encodeURIComponent(def?.name ?? name)}`),
      name: def?.name ?? name,
      color: def?.color ?? 'ededed',
      default: false,
      description: def?.description ?? null,
    };
  }

  /** The relationship GitHub reports next to a comment or issue author. */
  private authorAssociation(repo: RepoRecord, login: string): string {
    if (login === repo.owner) return 'OWNER';
    return ['admin', 'maintain', 'write'].includes(this.state.permission(repo, login))
      ? 'COLLABORATOR'
      : 'NONE';
  }

  issue(repo: RepoRecord, issue: IssueRecord): Json {
    const kind = issue.pull ? 'pull' : 'issues';
    const html = this.api(`/${repo.fullName}/${kind}/${issue.number}`);
    return {
      id: issue.id,
      node_id: `I_${issue.id}`,
      number: issue.number,
      title: issue.title,
      body: issue.body,
      state: issue.state,
      locked: issue.locked !== undefined,
      active_lock_reason: issue.locked?.reason ?? null,
      user: this.user(issue.user),
      labels: issue.labels.map((l) => this.label(repo, l)),
      assignee: null,
      assignees: [],
      milestone: null,
      comments: this.state.comments.filter((c) => c.repo === repo.fullName && c.issueNumber === issue.number)
        .length,
      author_association: this.authorAssociation(repo, issue.user),
      created_at: issue.createdAt,
      updated_at: issue.updatedAt,
      closed_at: issue.state === 'closed' ? issue.updatedAt : null,
      url: this.api(`/repos/${repo.fullName}/issues/${issue.number}`),
      repository_url: this.api(`/repos/${repo.fullName}`),
      labels_url: this.api(`/repos/${repo.fullName}/issues/${issue.number}/labels{/name}`),
      comments_url: this.api(`/repos/${repo.fullName}/issues/${issue.number}/comments`),
      events_url: this.api(`/repos/${repo.fullName}/issues/${issue.number}/events`),
      html_url: html,
      ...(issue.pull
        ? {
            draft: issue.pull.draft,
            pull_request: {
              url: this.api(`/repos/${repo.fullName}/pulls/${issue.number}`),
              html_url: html,
              diff_url: `${html}.diff`,
              patch_url: `${html}.patch`,
            },
          }
        : {}),
    };
  }

  comment(repo: RepoRecord, comment: CommentRecord): Json {
    const issue = this.state.issue(repo, comment.issueNumber);
    const kind = issue?.pull ? 'pull' : 'issues';
    return {
      id: comment.id,
      node_id: `IC_${comment.id}`,
      body: comment.body,
      user: this.user(comment.user),
      author_association: this.authorAssociation(repo, comment.user),
      created_at: comment.createdAt,
      updated_at: comment.updatedAt,
      url: this.api(`/repos/${repo.fullName}/issues/comments/${comment.id}`),
      html_url: this.api(`/${repo.fullName}/${kind}/${comment.issueNumber}#issuecomment-${comment.id}`),
      issue_url: this.api(`/repos/${repo.fullName}/issues/${comment.issueNumber}`),
    };
  }

  reaction(reaction: ReactionRecord): Json {
    return {
      id: reaction.id,
      node_id: `REA_${reaction.id}`,
      user: this.user(reaction.user),
      content: reaction.content,
      created_at: reaction.createdAt,
    };
  }

  pull(repo: RepoRecord, issue: IssueRecord): Json {
    const pull = issue.pull;
    if (!pull) throw new Error(`#${issue.number} is not a pull request`);
    const side = (ref: string, kept?: string) => ({
      label: `${repo.owner}:${ref}`,
      ref,
      sha: (branchExists(repo.bareDir, ref) && resolveCommit(repo.bareDir, ref)) || kept || null,
      user: this.user(repo.owner),
      repo: this.repo(repo),
    });
    const html = this.api(`/${repo.fullName}/pull/${issue.number}`);
    const url = this.api(`/repos/${repo.fullName}/pulls/${issue.number}`);
    const issueUrl = this.api(`/repos/${repo.fullName}/issues/${issue.number}`);
    const head = side(pull.head, pull.lastHead);
    const link = (href: string) => ({ href });
    const count = (
      p: { repo: string; issueNumber?: number; pullNumber?: number }[],
      key: 'issueNumber' | 'pullNumber',
    ) => p.filter((c) => c.repo === repo.fullName && c[key] === issue.number).length;
    return {
      id: issue.id,
      node_id: `PR_${issue.id}`,
      assignee: null,
      assignees: [],
      milestone: null,
      requested_teams: [],
      auto_merge: null,
      merge_commit_sha: null,
      merged_by: null,
      mergeable: null,
      mergeable_state: 'unknown',
      maintainer_can_modify: false,
      // Counts GitHub computes from the diff; the emulator does not.
      additions: 0,
      deletions: 0,
      changed_files: 0,
      commits: 0,
      comments: count(this.state.comments, 'issueNumber'),
      review_comments: count(this.state.reviewComments, 'pullNumber'),
      commits_url: `${url}/commits`,
      review_comments_url: `${url}/comments`,
      review_comment_url: this.api(`/repos/${repo.fullName}/pulls/comments{/number}`),
      comments_url: `${issueUrl}/comments`,
      statuses_url: this.api(`/repos/${repo.fullName}/statuses/${head.sha ?? ''}`),
      _links: {
        self: link(url),
        html: link(html),
        issue: link(issueUrl),
        comments: link(`${issueUrl}/comments`),
        review_comments: link(`${url}/comments`),
        review_comment: link(this.api(`/repos/${repo.fullName}/pulls/comments{/number}`)),
        commits: link(`${url}/commits`),
        statuses: link(this.api(`/repos/${repo.fullName}/statuses/${head.sha ?? ''}`)),
      },
      number: issue.number,
      state: issue.state,
      locked: issue.locked !== undefined,
      active_lock_reason: issue.locked?.reason ?? null,
      title: issue.title,
      body: issue.body,
      user: this.user(issue.user),
      labels: issue.labels.map((l) => this.label(repo, l)),
      draft: pull.draft,
      merged: false,
      merged_at: null,
      closed_at: issue.state === 'closed' ? issue.updatedAt : null,
      created_at: issue.createdAt,
      updated_at: issue.updatedAt,
      requested_reviewers: [...(this.state.reviewRequests.get(`${repo.fullName}#${issue.number}`) ?? [])].map(
        (l) => this.user(l),
      ),
      head,
      base: side(pull.base),
      author_association: this.authorAssociation(repo, issue.user),
      url,
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      issue_url: issueUrl,
    };
  }

  review(repo: RepoRecord, review: ReviewRecord): Json {
    return {
      id: review.id,
      node_id: `PRR_${review.id}`,
      user: this.user(review.user),
      body: review.body,
      state: review.state,
      commit_id: review.commitId,
      submitted_at: review.submittedAt,
      author_association: this.authorAssociation(repo, review.user),
      html_url: this.api(`/${repo.fullName}/pull/${review.pullNumber}#pullrequestreview-${review.id}`),
      pull_request_url: this.api(`/repos/${repo.fullName}/pulls/${review.pullNumber}`),
      _links: {
        html: {
          href: this.api(`/${repo.fullName}/pull/${review.pullNumber}#pullrequestreview-${review.id}`),
        },
        pull_request: { href: this.api(`/repos/${repo.fullName}/pulls/${review.pullNumber}`) },
      },
    };
  }

  /**
   * A review comment as GitHub renders it: `line` is null once the commented hunk changed on the
   * pull request's head (GitHub's "outdated"); `original_line` keeps where it was made.
   */
  reviewComment(repo: RepoRecord, c: ReviewCommentRecord): Json {
    const pull = this.state.issue(repo, c.pullNumber)?.pull;
    const head =
      pull && branchExists(repo.bareDir, pull.head) ? resolveCommit(repo.bareDir, pull.head) : null;
    const current =
      pull && head && c.line !== null ? diffHunk(repo.bareDir, pull.base, head, c.path, c.line) : null;
    const line = current === c.diffHunk ? c.line : null;
    const url = this.api(`/repos/${repo.fullName}/pulls/comments/${c.id}`);
    const html = this.api(`/${repo.fullName}/pull/${c.pullNumber}#discussion_r${c.id}`);
    const pullUrl = this.api(`/repos/${repo.fullName}/pulls/${c.pullNumber}`);
    return {
      id: c.id,
      node_id: `PRRC_${c.id}`,
      pull_request_review_id: c.reviewId,
      in_reply_to_id: c.inReplyTo ?? undefined,
      user: this.user(c.user),
      body: c.body,
      path: c.path,
      line,
      original_line: c.originalLine,
      side: 'RIGHT',
      position: line,
      original_position: c.originalLine,
      diff_hunk: c.diffHunk,
      commit_id: head ?? c.commitId,
      original_commit_id: c.commitId,
      author_association: this.authorAssociation(repo, c.user),
      created_at: c.createdAt,
      updated_at: c.createdAt,
      url,
      html_url: html,
      pull_request_url: pullUrl,
      _links: { self: { href: url }, html: { href: html }, pull_request: { href: pullUrl } },
    };
  }

  /** A suite's status and conclusion come from its runs, as on GitHub. */
  checkSuite(repo: RepoRecord, suite: CheckSuiteRecord): Json {
    const runs = this.state.checkRuns.filter((r) => r.suiteId === suite.id);
    const done = runs.every((r) => r.status === 'completed');
    const failing = ['failure', 'timed_out', 'cancelled', 'action_required', 'startup_failure'];
    const conclusion = !done
      ? null
      : (failing.find((c) => runs.some((r) => r.conclusion === c)) ?? (runs.length ? 'success' : 'neutral'));
    const pulls = this.state.issues.filter(
      (i) => i.repo === repo.fullName && i.state === 'open' && i.pull && i.pull.head === suite.headBranch,
    );
    const repoRef = { id: repo.id, name: repo.name, url: this.api(`/repos/${repo.fullName}`) };
    const base = (ref: string) => (branchExists(repo.bareDir, ref) && resolveCommit(repo.bareDir, ref)) || '';
    // The emulator keeps no commit details for a suite; GitHub's fields are there, as it documents them.
    const at = '2024-01-01T00:00:00Z';
    return {
      id: suite.id,
      node_id: `CS_${suite.id}`,
      head_branch: suite.headBranch,
      head_sha: suite.headSha,
      status: done ? 'completed' : runs.some((r) => r.status === 'in_progress') ? 'in_progress' : 'queued',
      conclusion,
      before: null,
      after: suite.headSha,
      created_at: suite.createdAt,
      updated_at: suite.updatedAt,
      head_commit: {
        id: suite.headSha,
        tree_id: suite.headSha,
        message: '',
        timestamp: at,
        author: { name: repo.owner, email: `${repo.owner}@example.com` },
        committer: { name: repo.owner, email: `${repo.owner}@example.com` },
      },
      repository: this.repo(repo),
      latest_check_runs_count: runs.length,
      check_runs_url: this.api(`/repos/${repo.fullName}/check-suites/${suite.id}/check-runs`),
      app: this.checkApp(repo, suite.app),
      pull_requests: pulls.map((i) => ({
        id: i.id,
        number: i.number,
        url: this.api(`/repos/${repo.fullName}/pulls/${i.number}`),
        head: { ref: i.pull!.head, sha: suite.headSha, repo: repoRef },
        base: { ref: i.pull!.base, sha: base(i.pull!.base), repo: repoRef },
      })),
      url: this.api(`/repos/${repo.fullName}/check-suites/${suite.id}`),
    };
  }

  /** The app that reported a suite (GitHub's "integration"), known to the emulator by its slug only. */
  private checkApp(repo: RepoRecord, slug: string): Json {
    const at = '2024-01-01T00:00:00Z';
    return {
      id: 1,
      slug,
      node_id: `A_${slug}`,
      owner: this.user(repo.owner),
      name: slug,
      description: null,
      external_url: this.api(`/apps/${slug}`),
      html_url: this.api(`/apps/${slug}`),
      created_at: at,
      updated_at: at,
      permissions: { checks: 'write' },
      events: ['check_suite'],
    };
  }

  checkRun(repo: RepoRecord, run: CheckRunRecord): Json {
    const suite = this.state.checkSuites.find((c) => c.id === run.suiteId)!;
    return {
      id: run.id,
      node_id: `CR_${run.id}`,
      name: run.name,
      head_sha: run.headSha,
      status: run.status,
      conclusion: run.conclusion,
      output: {
        ...run.output,
        annotations_count: run.annotations.length,
        annotations_url: this.api(`/repos/${repo.fullName}/check-runs/${run.id}/annotations`),
      },
      check_suite: { id: run.suiteId },
      app: this.checkApp(repo, suite.app),
      url: this.api(`/repos/${repo.fullName}/check-runs/${run.id}`),
      html_url: this.api(`/${repo.fullName}/runs/${run.id}`),
      details_url: null,
      external_id: null,
      // The emulator keeps no times for a run, nor which pull requests it belongs to.
      started_at: null,
      completed_at: null,
      pull_requests: [],
    };
  }
}
