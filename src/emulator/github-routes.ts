/**
 * The emulator's REST API: a small route table over EmulatorState and the real bare repositories.
 * App routes take the app's JWT; repository routes take an installation token of the installation
 * that covers the repository (others get GitHub's 404, as for a private repository).
 */
import { z } from 'zod';
import type { AppAuth, Credentials } from './github-auth.js';
import {
  branchExists,
  commitInfo,
  commitsBetween,
  diffFiles,
  hasCommitsBetween,
  mergeBase,
  readBlob,
  readTreePath,
  resolveCommit,
} from './github-git.js';
import type { Json, Shapes } from './github-shapes.js';
import { timestamp, type EmulatorState, type InstallationRecord, type RepoRecord } from './github-state.js';

export const BODY_LIMIT = 65536;
/** The most commits GitHub lists for a pull request, and for a comparison asked without paging. */
export const PULL_COMMITS_LIMIT = 250;
const DOCS = 'https://docs.github.com/rest';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Ends a handler with an HTTP error response; the dispatcher turns it into the reply. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Json,
  ) {
    super(String(body.message));
  }
}

/** The contents API returns a file's content inline only up to this size. */
const CONTENTS_MAX_BYTES = 1024 * 1024;
const notFound = () => new ApiError(404, { message: 'Not Found', documentation_url: DOCS });
const badCredentials = () => new ApiError(401, { message: 'Bad credentials', documentation_url: DOCS });
/** A list's `since` (only what was updated at or after it, an ISO 8601 time) as milliseconds; none: all. */
function since(ctx: { query: URLSearchParams }, resource: string): number {
  const at = ctx.query.get('since');
  if (at === null) return -Infinity;
  const ms = Date.parse(at);
  if (Number.isNaN(ms)) throw validationFailed({ resource, field: 'since', code: 'invalid' });
  return ms;
}
/** When the emulated app was registered (a fixed time: GitHub's answer does not change between calls). */
const APP_CREATED = '2024-01-01T00:00:00Z';
const validationFailed = (...errors: Json[]) =>
  new ApiError(422, { message: 'Validation Failed', errors, documentation_url: DOCS });

export interface RequestInput {
  method: string;
  /** Raw (still percent-encoded) path. */
  pathname: string;
  query: URLSearchParams;
  body: unknown;
  creds: Credentials;
  accept: string;
}

interface Ctx extends RequestInput {
  params: Record<string, string>;
}
interface RepoCtx extends Ctx {
  repo: RepoRecord;
}

interface Route {
  method: string;
  regex: RegExp;
  names: string[];
  /** `graphql`: an installation token for the repository named by the query's variables. */
  auth: 'app' | 'repo' | 'graphql';
  handle: (ctx: Ctx & Partial<RepoCtx>) => Reply;
}

/** `:name` matches one segment, `:name*` the rest of the path (branch names and file paths). */
function compile(pattern: string): { regex: RegExp; names: string[] } {
  const names: string[] = [];
  const source = pattern.replace(/:(\w+)(\*?)/g, (_m, name: string, rest: string) => {
    names.push(name);
    return rest ? '(.+)' : '([^/]+)';
  });
  return { regex: new RegExp(`^${source}/?$`), names };
}

function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((i) => `For '${i.path.join('/') || 'body'}', ${i.message}`);
  throw new ApiError(422, { message: `Invalid request.\n\n${details.join('\n')}`, documentation_url: DOCS });
}

function checkBodyLength(resource: string, body: string | null | undefined): void {
  if (body && Array.from(body).length > BODY_LIMIT) {
    throw validationFailed({
      resource,
      code: 'custom',
      field: 'body',
      message: `body is too long (maximum is ${BODY_LIMIT} characters)`,
    });
  }
}

const intParam = (value: string | undefined): number => {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw notFound();
  return n;
};

/**
 * GitHub's page/per_page pagination with a Link header, as Octokit's paginate() follows it; `shape`
 * renders only the page's items (a commit's JSON costs a git call).
 */
function paginate<T>(items: T[], ctx: Ctx, baseUrl: string, shape: (item: T) => unknown = (i) => i): Reply {
  const perPage = Math.min(100, Math.max(1, Number(ctx.query.get('per_page')) || 30));
  const page = Math.max(1, Number(ctx.query.get('page')) || 1);
  const last = Math.max(1, Math.ceil(items.length / perPage));
  const link = (p: number, rel: string) => {
    const q = new URLSearchParams(ctx.query);
    q.set('per_page', String(perPage));
    q.set('page', String(p));
    return `<${baseUrl}${ctx.pathname}?${q}>; rel="${rel}"`;
  };
  const links = [
    ...(page < last ? [link(page + 1, 'next'), link(last, 'last')] : []),
    ...(page > 1 ? [link(1, 'first'), link(page - 1, 'prev')] : []),
  ];
  return {
    status: 200,
    body: items.slice((page - 1) * perPage, page * perPage).map(shape),
    ...(links.length ? { headers: { link: links.join(', ') } } : {}),
  };
}

const REACTIONS = ['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes'] as const;
const LabelsBody = z.union([
  z.array(z.string().min(1)),
  z.strictObject({
    labels: z.array(z.union([z.string().min(1), z.strictObject({ name: z.string().min(1) })])),
  }),
]);
const IssueBody = z.strictObject({
  title: z.string().min(1),
  body: z.string().nullish(),
  labels: z.array(z.string()).optional(),
  assignees: z.array(z.string()).optional(),
});
const CommentBody = z.strictObject({ body: z.string().min(1) });
const LabelBody = z.strictObject({
  name: z.string().min(1),
  color: z
    .string()
    .regex(/^#?[0-9a-fA-F]{6}$/)
    .optional(),
  description: z.string().max(100).optional(),
});
const ReactionBody = z.strictObject({ content: z.enum(REACTIONS) });
const PullCreateBody = z.strictObject({
  title: z.string().min(1),
  body: z.string().nullish(),
  head: z.string().min(1),
  base: z.string().min(1),
  draft: z.boolean().optional(),
  maintainer_can_modify: z.boolean().optional(),
});
// Draft state cannot be changed through REST on GitHub (GraphQL only), so `draft` is rejected here.
const PullUpdateBody = z.strictObject({
  title: z.string().min(1).optional(),
  body: z.string().nullish(),
  state: z.enum(['open', 'closed']).optional(),
  base: z.string().min(1).optional(),
  maintainer_can_modify: z.boolean().optional(),
});
const ReplyBody = z.strictObject({ body: z.string().min(1) });
const ReviewersBody = z.strictObject({
  reviewers: z.array(z.string().min(1)).optional(),
  team_reviewers: z.array(z.string().min(1)).optional(),
});
// GraphQL is served for one query only: a pull request's review threads and whether they are resolved.
const GraphqlBody = z.object({
  query: z.string(),
  variables: z.object({
    owner: z.string(),
    repo: z.string(),
    pr: z.number().int(),
    after: z.string().nullish(),
  }),
});
const TokenBody = z
  .strictObject({
    repositories: z.array(z.string()).optional(),
    repository_ids: z.array(z.number()).optional(),
    permissions: z.record(z.string(), z.string()).optional(),
  })
  .optional();

export interface RouterDeps {
  state: EmulatorState;
  auth: AppAuth;
  shapes: Shapes;
  baseUrl: () => string;
  app: { id: number; slug: string; name: string };
}

export function createRouter({
  state,
  auth,
  shapes,
  baseUrl,
  app,
}: RouterDeps): (input: RequestInput) => Reply {
  const routes: Route[] = [];
  const on = (method: string, pattern: string, handle: (ctx: Ctx) => Reply) =>
    routes.push({ method, ...compile(pattern), auth: 'app', handle });
  const onRepo = (method: string, pattern: string, handle: (ctx: RepoCtx) => Reply) =>
    routes.push({ method, ...compile(pattern), auth: 'repo', handle: handle as Route['handle'] });
  const ok = (body: unknown, status = 200): Reply => ({ status, body });
  const bot = state.botLogin;
  const permissions = {
    contents: 'write',
    issues: 'write',
    pull_requests: 'write',
    checks: 'read',
    metadata: 'read',
  };
  const events = [
    'issues',
    'issue_comment',
    'pull_request_review',
    'pull_request_review_comment',
    'check_suite',
  ];

  const installationJson = (inst: InstallationRecord): Json => ({
    id: inst.id,
    account: shapes.user(inst.account),
    app_id: app.id,
    app_slug: app.slug,
    target_id: state.user(inst.account).id,
    target_type: state.user(inst.account).type === 'Bot' ? 'Bot' : 'User',
    repository_selection: 'all',
    single_file_name: null,
    permissions,
    events,
    access_tokens_url: `${baseUrl()}/app/installations/${inst.id}/access_tokens`,
    repositories_url: `${baseUrl()}/installation/repositories`,
    html_url: `${baseUrl()}/settings/installations/${inst.id}`,
    created_at: inst.createdAt,
    updated_at: inst.createdAt,
    suspended_by: null,
    suspended_at: null,
  });
  // A transferred issue's own URL redirects (issueMoved); its comments, labels and the rest answer 404,
  // as GitHub does (its redirect covers the issue resource only).
  const issueOf = (ctx: RepoCtx, n = ctx.params.number) => {
    if (state.deletedIssues.has(`${ctx.repo.fullName}#${intParam(n)}`))
      throw new ApiError(410, { message: 'This issue was deleted', documentation_url: DOCS });
    return state.issue(ctx.repo, intParam(n)) ?? throwIt(notFound());
  };
  /**
   * GitHub's 301 for a transferred issue. Its Location names `/repositories/{id}/issues/{n}`, an alias
   * the OpenAPI description lacks; the emulator names the documented path of the same issue.
   */
  const issueMoved = (ctx: RepoCtx): Reply | null => {
    const to = state.movedIssues.get(`${ctx.repo.fullName}#${intParam(ctx.params.number)}`);
    if (!to) return null;
    const url = `${baseUrl()}/repos/${to.repo}/issues/${to.number}`;
    return {
      status: 301,
      headers: { location: url },
      body: { message: 'Moved Permanently', url, documentation_url: `${DOCS}#follow-redirects` },
    };
  };
  const pullOf = (ctx: RepoCtx) => {
    const issue = issueOf(ctx);
    return issue.pull ? issue : throwIt(notFound());
  };
  const commentOf = (ctx: RepoCtx) => state.comment(ctx.repo, intParam(ctx.params.id)) ?? throwIt(notFound());
  const commitJson = (repo: RepoRecord, sha: string): Json => {
    const info = commitInfo(repo.bareDir, sha) ?? throwIt(notFound());
    const person = { name: info.authorName, email: info.authorEmail, date: info.date };
    const api = `${baseUrl()}/repos/${repo.fullName}`;
    return {
      sha: info.sha,
      node_id: `C_${info.sha}`,
      commit: {
        message: info.message,
        tree: { sha: info.tree, url: `${api}/git/trees/${info.tree}` },
        author: person,
        committer: person,
        comment_count: 0,
        url: `${api}/git/commits/${info.sha}`,
      },
      // The git identities are not GitHub accounts here; GitHub answers null for such commits too.
      author: null,
      committer: null,
      parents: info.parents.map((p) => ({ sha: p, url: `${api}/commits/${p}` })),
      url: `${api}/commits/${info.sha}`,
      html_url: `${baseUrl()}/${repo.fullName}/commit/${info.sha}`,
      comments_url: `${api}/commits/${info.sha}/comments`,
    };
  };

  /** The files `base...head` changes, as GitHub lists them (a pull request's, a comparison's). */
  const filesJson = (repo: RepoRecord, base: string, headRef: string): Json[] => {
    const head = resolveCommit(repo.bareDir, headRef) as string;
    const at = (kind: string, file: string) =>
      `${baseUrl()}/${repo.fullName}/${kind}/${head}/${file.split('/').map(encodeURIComponent).join('/')}`;
    return diffFiles(repo.bareDir, base, head).map((f) => ({
      ...f,
      blob_url: at('blob', f.filename),
      raw_url: at('raw', f.filename),
      contents_url: `${baseUrl()}/repos/${repo.fullName}/contents/${f.filename}?ref=${head}`,
    }));
  };

  // --- GitHub App (JWT) ---
  on('GET', '/app', () =>
    ok({
      id: app.id,
      slug: app.slug,
      name: app.name,
      node_id: `A_${app.id}`,
      owner: shapes.user(bot),
      description: null,
      external_url: `${baseUrl()}/apps/${app.slug}`,
      html_url: `${baseUrl()}/apps/${app.slug}`,
      created_at: APP_CREATED,
      updated_at: APP_CREATED,
      permissions,
      events,
      installations_count: state.installations.size,
    }),
  );
  on('GET', '/app/installations', () => ok([...state.installations.values()].map(installationJson)));
  on('GET', '/app/installations/:id', (ctx) =>
    ok(installationJson(state.installations.get(intParam(ctx.params.id)) ?? throwIt(notFound()))),
  );
  on('GET', '/repos/:owner/:repo/installation', (ctx) => {
    const repo = state.repo(ctx.params.owner ?? '', ctx.params.repo ?? '') ?? throwIt(notFound());
    return ok(installationJson(state.installations.get(repo.installationId) as InstallationRecord));
  });
  on('POST', '/app/installations/:id/access_tokens', (ctx) => {
    parseBody(TokenBody, ctx.body);
    const inst = state.installations.get(intParam(ctx.params.id)) ?? throwIt(notFound());
    const issued = auth.issueToken(inst.id);
    return ok(
      {
        token: issued.token,
        expires_at: issued.expiresAt.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        permissions,
        repository_selection: 'all',
      },
      201,
    );
  });

  // --- Repository, refs and contents ---
  onRepo('GET', '/repos/:owner/:repo', (ctx) => ok(shapes.repo(ctx.repo)));
  onRepo('GET', '/repos/:owner/:repo/branches/:branch*', (ctx) => {
    const name = ctx.params.branch as string;
    if (!branchExists(ctx.repo.bareDir, name))
      throw new ApiError(404, { message: 'Branch not found', documentation_url: DOCS });
    const sha = resolveCommit(ctx.repo.bareDir, name) as string;
    const self = `${baseUrl()}/repos/${ctx.repo.fullName}/branches/${name}`;
    return ok({
      name,
      commit: commitJson(ctx.repo, sha),
      protected: false,
      protection: { enabled: false },
      protection_url: `${self}/protection`,
      _links: { self, html: `${baseUrl()}/${ctx.repo.fullName}/tree/${name}` },
    });
  });
  onRepo('GET', '/repos/:owner/:repo/git/ref/:ref*', (ctx) => {
    const ref = ctx.params.ref as string;
    const sha =
      ref.startsWith('heads/') && branchExists(ctx.repo.bareDir, ref.slice(6))
        ? resolveCommit(ctx.repo.bareDir, ref.slice(6))
        : null;
    if (!sha) throw notFound();
    return ok({
      ref: `refs/${ref}`,
      node_id: `REF_${sha}`,
      url: `${baseUrl()}/repos/${ctx.repo.fullName}/git/refs/${ref}`,
      object: { sha, type: 'commit', url: `${baseUrl()}/repos/${ctx.repo.fullName}/git/commits/${sha}` },
    });
  });
  // --- Checks (before commits/:ref*, which would take the rest of the path) ---
  onRepo('GET', '/repos/:owner/:repo/commits/:ref/check-runs', (ctx) => {
    const sha = resolveCommit(ctx.repo.bareDir, ctx.params.ref as string);
    const runs = state.checkRuns.filter((r) => r.repo === ctx.repo.fullName && r.headSha === sha);
    const page = paginate(
      runs.map((r) => shapes.checkRun(ctx.repo, r)),
      ctx,
      baseUrl(),
    );
    return { ...page, body: { total_count: runs.length, check_runs: page.body } };
  });
  onRepo('GET', '/repos/:owner/:repo/commits/:ref/check-suites', (ctx) => {
    const sha = resolveCommit(ctx.repo.bareDir, ctx.params.ref as string);
    const suites = state.checkSuites.filter((c) => c.repo === ctx.repo.fullName && c.headSha === sha);
    return ok({
      total_count: suites.length,
      check_suites: suites.map((c) => shapes.checkSuite(ctx.repo, c)),
    });
  });
  onRepo('GET', '/repos/:owner/:repo/check-suites/:id', (ctx) => {
    const id = intParam(ctx.params.id);
    const suite =
      state.checkSuites.find((c) => c.id === id && c.repo === ctx.repo.fullName) ?? throwIt(notFound());
    return ok(shapes.checkSuite(ctx.repo, suite));
  });
  onRepo('GET', '/repos/:owner/:repo/check-suites/:id/check-runs', (ctx) => {
    const id = intParam(ctx.params.id);
    const runs = state.checkRuns.filter((r) => r.repo === ctx.repo.fullName && r.suiteId === id);
    const page = paginate(
      runs.map((r) => shapes.checkRun(ctx.repo, r)),
      ctx,
      baseUrl(),
    );
    return { ...page, body: { total_count: runs.length, check_runs: page.body } };
  });
  onRepo('GET', '/repos/:owner/:repo/check-runs/:id/annotations', (ctx) => {
    const id = intParam(ctx.params.id);
    const run =
      state.checkRuns.find((r) => r.id === id && r.repo === ctx.repo.fullName) ?? throwIt(notFound());
    return paginate(
      run.annotations.map((a) => ({
        ...a,
        blob_href: '',
        start_column: null,
        end_column: null,
        title: null,
        raw_details: null,
      })),
      ctx,
      baseUrl(),
    );
  });
  // `base...head`: the status comes from the whole history; only the listed commits are capped or paged.
  onRepo('GET', '/repos/:owner/:repo/compare/:basehead*', (ctx) => {
    const { bareDir } = ctx.repo;
    const [baseRef = '', headRef = ''] = (ctx.params.basehead as string).split('...');
    const base = resolveCommit(bareDir, baseRef) ?? throwIt(notFound());
    const head = resolveCommit(bareDir, headRef) ?? throwIt(notFound());
    const merge = mergeBase(bareDir, base, head) ?? throwIt(notFound());
    const ahead = commitsBetween(bareDir, merge, head);
    const behind = commitsBetween(bareDir, merge, base).length;
    const status =
      ahead.length === 0 ? (behind === 0 ? 'identical' : 'behind') : behind === 0 ? 'ahead' : 'diverged';
    const paged = ctx.query.has('per_page') || ctx.query.has('page');
    const shape = (sha: string) => commitJson(ctx.repo, sha);
    const listed = paged
      ? paginate(ahead, ctx, baseUrl(), shape)
      : { body: ahead.slice(-PULL_COMMITS_LIMIT).map(shape), headers: undefined };
    const page = Math.max(1, Number(ctx.query.get('page')) || 1);
    const api = `${baseUrl()}/repos/${ctx.repo.fullName}`;
    const html = `${baseUrl()}/${ctx.repo.fullName}/compare/${ctx.params.basehead}`;
    return {
      status: 200,
      ...(listed.headers ? { headers: listed.headers } : {}),
      body: {
        url: `${api}/compare/${ctx.params.basehead}`,
        html_url: html,
        permalink_url: `${baseUrl()}/${ctx.repo.fullName}/compare/${base}...${head}`,
        diff_url: `${html}.diff`,
        patch_url: `${html}.patch`,
        base_commit: commitJson(ctx.repo, base),
        merge_base_commit: commitJson(ctx.repo, merge),
        status,
        ahead_by: ahead.length,
        behind_by: behind,
        total_commits: ahead.length,
        commits: listed.body,
        ...(page === 1 ? { files: filesJson(ctx.repo, base, head) } : {}), // on the first page only
      },
    };
  });
  onRepo('GET', '/repos/:owner/:repo/commits/:ref*', (ctx) => {
    const sha = resolveCommit(ctx.repo.bareDir, ctx.params.ref as string);
    if (!sha)
      throw validationFailed({
        resource: 'Commit',
        code: 'invalid',
        message: `No commit found for SHA: ${ctx.params.ref}`,
      });
    return ok(commitJson(ctx.repo, sha));
  });
  onRepo('GET', '/repos/:owner/:repo/contents/:path*', (ctx) => {
    const ref = ctx.query.get('ref') ?? ctx.repo.defaultBranch;
    const commit = resolveCommit(ctx.repo.bareDir, ref);
    if (!commit)
      throw new ApiError(404, { message: `No commit found for the ref ${ref}`, documentation_url: DOCS });
    const filePath = (ctx.params.path as string).replace(/^\/+|\/+$/g, '');
    const entry = readTreePath(ctx.repo.bareDir, commit, filePath) ?? throwIt(notFound());
    const url = (p: string) =>
      `${baseUrl()}/repos/${ctx.repo.fullName}/contents/${p}?ref=${encodeURIComponent(ref)}`;
    const links = (p: string, sha: string, kind: 'blob' | 'tree') => {
      const git = `${baseUrl()}/repos/${ctx.repo.fullName}/git/${kind}s/${sha}`;
      const html = `${baseUrl()}/${ctx.repo.fullName}/${kind}/${ref}/${p}`;
      return { url: url(p), html_url: html, git_url: git, _links: { self: url(p), git, html } };
    };
    if (entry.kind === 'tree') {
      return ok(
        entry.entries.map((e) => {
          const p = filePath ? `${filePath}/${e.name}` : e.name;
          return {
            type: e.type === 'tree' ? 'dir' : 'file',
            name: e.name,
            path: p,
            sha: e.sha,
            size: e.size,
            download_url: null,
            ...links(p, e.sha, e.type === 'tree' ? 'tree' : 'blob'),
          };
        }),
      );
    }
    // Octokit's `mediaType: { format: 'raw' }` (used by Probot's context.config) asks for the bytes.
    if (/application\/vnd\.github(\.v3)?\.raw/.test(ctx.accept)) {
      return { status: 200, body: entry.content, headers: { 'content-type': 'text/plain; charset=utf-8' } };
    }
    // Like GitHub, the JSON form leaves out the content of files over 1 MB (read them as git blobs).
    const large = entry.content.length > CONTENTS_MAX_BYTES;
    return ok({
      type: 'file',
      encoding: large ? 'none' : 'base64',
      name: filePath.split('/').pop(),
      path: filePath,
      sha: entry.sha,
      size: entry.content.length,
      content: large ? '' : entry.content.toString('base64'),
      download_url: null,
      ...links(filePath, entry.sha, 'blob'),
    });
  });
  onRepo('GET', '/repos/:owner/:repo/git/blobs/:sha', (ctx) => {
    const sha = ctx.params.sha as string;
    const content = /^[0-9a-f]{40}$/.test(sha) ? readBlob(ctx.repo.bareDir, sha) : null;
    if (!content) throw notFound();
    return ok({
      sha,
      node_id: `B_${sha}`,
      size: content.length,
      url: `${baseUrl()}/repos/${ctx.repo.fullName}/git/blobs/${sha}`,
      content: content.toString('base64'),
      encoding: 'base64',
    });
  });
  onRepo('GET', '/repos/:owner/:repo/collaborators/:user/permission', (ctx) => {
    const login = ctx.params.user as string;
    const role = state.permission(ctx.repo, login);
    if (role === 'none' && !state.users.has(login)) throw notFound();
    // GitHub's legacy `permission` folds maintain into write and triage into read; role_name is exact.
    const legacy = role === 'maintain' ? 'write' : role === 'triage' ? 'read' : role;
    const rank = ['none', 'read', 'triage', 'write', 'maintain', 'admin'].indexOf(role);
    return ok({
      permission: legacy,
      role_name: role,
      user: {
        ...shapes.user(login),
        permissions: {
          pull: rank >= 1,
          triage: rank >= 2,
          push: rank >= 3,
          maintain: rank >= 4,
          admin: rank >= 5,
        },
        role_name: role,
      },
    });
  });

  // --- Issues, labels, comments, reactions ---
  onRepo('POST', '/repos/:owner/:repo/issues', (ctx) => {
    const input = parseBody(IssueBody, ctx.body);
    checkBodyLength('Issue', input.body);
    const issue = state.createIssue(ctx.repo, {
      title: input.title,
      body: input.body,
      user: bot,
      labels: input.labels,
    });
    return ok(shapes.issue(ctx.repo, issue), 201);
  });
  onRepo(
    'GET',
    '/repos/:owner/:repo/issues/:number',
    (ctx) => issueMoved(ctx) ?? ok(shapes.issue(ctx.repo, issueOf(ctx))),
  );
  onRepo('GET', '/repos/:owner/:repo/labels', (ctx) =>
    paginate(
      [...ctx.repo.labels.values()].map((l) => shapes.label(ctx.repo, l.name)),
      ctx,
      baseUrl(),
    ),
  );
  onRepo('GET', '/repos/:owner/:repo/labels/:name', (ctx) => {
    const label = ctx.repo.labels.get((ctx.params.name as string).toLowerCase()) ?? throwIt(notFound());
    return ok(shapes.label(ctx.repo, label.name));
  });
  onRepo('POST', '/repos/:owner/:repo/labels', (ctx) => {
    const input = parseBody(LabelBody, ctx.body);
    if (ctx.repo.labels.has(input.name.toLowerCase()))
      throw validationFailed({ resource: 'Label', code: 'already_exists', field: 'name' });
    ctx.repo.labels.set(input.name.toLowerCase(), {
      name: input.name,
      color: (input.color ?? 'ededed').replace(/^#/, '').toLowerCase(),
      description: input.description ?? null,
    });
    return ok(shapes.label(ctx.repo, input.name), 201);
  });
  onRepo('GET', '/repos/:owner/:repo/issues/:number/labels', (ctx) =>
    ok(issueOf(ctx).labels.map((l) => shapes.label(ctx.repo, l))),
  );
  onRepo('POST', '/repos/:owner/:repo/issues/:number/labels', (ctx) => {
    const issue = issueOf(ctx);
    const input = parseBody(LabelsBody, ctx.body);
    const names = (Array.isArray(input) ? input : input.labels).map((l) =>
      typeof l === 'string' ? l : l.name,
    );
    issue.labels = [...new Set([...issue.labels, ...names])];
    issue.updatedAt = timestamp();
    return ok(issue.labels.map((l) => shapes.label(ctx.repo, l)));
  });
  onRepo('DELETE', '/repos/:owner/:repo/issues/:number/labels/:name', (ctx) => {
    const issue = issueOf(ctx);
    if (!issue.labels.includes(ctx.params.name as string)) {
      throw new ApiError(404, { message: 'Label does not exist', documentation_url: DOCS });
    }
    issue.labels = issue.labels.filter((l) => l !== ctx.params.name);
    issue.updatedAt = timestamp();
    return ok(issue.labels.map((l) => shapes.label(ctx.repo, l)));
  });
  onRepo('GET', '/repos/:owner/:repo/issues/:number/comments', (ctx) => {
    const issue = issueOf(ctx);
    const from = since(ctx, 'IssueComment');
    const list = state.comments.filter(
      (c) =>
        c.repo === ctx.repo.fullName && c.issueNumber === issue.number && Date.parse(c.updatedAt) >= from,
    );
    return paginate(
      list.map((c) => shapes.comment(ctx.repo, c)),
      ctx,
      baseUrl(),
    );
  });
  onRepo('POST', '/repos/:owner/:repo/issues/:number/comments', (ctx) => {
    const issue = issueOf(ctx);
    const input = parseBody(CommentBody, ctx.body);
    checkBodyLength('IssueComment', input.body);
    // Only collaborators comment on a locked conversation; an app's installation is none.
    if (issue.locked)
      throw new ApiError(403, {
        message: 'Unable to create comment because issue is locked.',
        documentation_url: 'https://docs.github.com/articles/locking-conversations/',
      });
    return ok(shapes.comment(ctx.repo, state.addComment(ctx.repo, issue.number, input.body, bot)), 201);
  });
  onRepo('GET', '/repos/:owner/:repo/issues/comments/:id', (ctx) =>
    ok(shapes.comment(ctx.repo, commentOf(ctx))),
  );
  onRepo('PATCH', '/repos/:owner/:repo/issues/comments/:id', (ctx) => {
    const comment = commentOf(ctx);
    const input = parseBody(CommentBody, ctx.body);
    checkBodyLength('IssueComment', input.body);
    comment.body = input.body;
    comment.updatedAt = timestamp();
    return ok(shapes.comment(ctx.repo, comment));
  });
  onRepo('DELETE', '/repos/:owner/:repo/issues/comments/:id', (ctx) => {
    const comment = commentOf(ctx);
    state.comments.splice(state.comments.indexOf(comment), 1);
    return { status: 204 };
  });
  onRepo('GET', '/repos/:owner/:repo/issues/comments/:id/reactions', (ctx) => {
    const comment = commentOf(ctx);
    const list = state.reactions.filter((r) => r.repo === ctx.repo.fullName && r.commentId === comment.id);
    return paginate(
      list.map((r) => shapes.reaction(r)),
      ctx,
      baseUrl(),
    );
  });
  onRepo('POST', '/repos/:owner/:repo/issues/comments/:id/reactions', (ctx) => {
    const comment = commentOf(ctx);
    const { content } = parseBody(ReactionBody, ctx.body);
    const existing = state.reactions.find(
      (r) => r.commentId === comment.id && r.content === content && r.user === bot,
    );
    if (existing) return ok(shapes.reaction(existing));
    const reaction = {
      id: state.newId(),
      repo: ctx.repo.fullName,
      commentId: comment.id,
      content,
      user: bot,
      createdAt: timestamp(),
    };
    state.reactions.push(reaction);
    return ok(shapes.reaction(reaction), 201);
  });

  // --- Pull requests ---
  /** `owner:branch` or `branch`; forks are not emulated. */
  const headBranch = (repo: RepoRecord, head: string): string | null => {
    const colon = head.indexOf(':');
    if (colon < 0) return head;
    return head.slice(0, colon).toLowerCase() === repo.owner.toLowerCase() ? head.slice(colon + 1) : null;
  };
  onRepo('GET', '/repos/:owner/:repo/pulls', (ctx) => {
    const stateFilter = ctx.query.get('state') ?? 'open';
    const head = ctx.query.get('head');
    const headFilter = head ? headBranch(ctx.repo, head) : undefined;
    const base = ctx.query.get('base');
    const list = state.issues
      .filter((i) => i.repo === ctx.repo.fullName && i.pull)
      .filter((i) => stateFilter === 'all' || i.state === stateFilter)
      .filter((i) => headFilter === undefined || i.pull?.head === headFilter)
      .filter((i) => !base || i.pull?.base === base)
      .sort((a, b) => b.number - a.number);
    return paginate(
      list.map((i) => shapes.pull(ctx.repo, i)),
      ctx,
      baseUrl(),
    );
  });
  onRepo('POST', '/repos/:owner/:repo/pulls', (ctx) => {
    const input = parseBody(PullCreateBody, ctx.body);
    checkBodyLength('PullRequest', input.body);
    const { bareDir, owner } = ctx.repo;
    const head = headBranch(ctx.repo, input.head);
    if (!branchExists(bareDir, input.base)) {
      throw validationFailed({ resource: 'PullRequest', field: 'base', code: 'invalid' });
    }
    if (!head || !branchExists(bareDir, head)) {
      throw validationFailed({ resource: 'PullRequest', field: 'head', code: 'invalid' });
    }
    const open = state.issues.find(
      (i) =>
        i.repo === ctx.repo.fullName &&
        i.state === 'open' &&
        i.pull?.head === head &&
        i.pull.base === input.base,
    );
    if (open) {
      throw validationFailed({
        resource: 'PullRequest',
        code: 'custom',
        message: `A pull request already exists for ${owner}:${head}.`,
      });
    }
    if (!hasCommitsBetween(bareDir, input.base, head)) {
      throw validationFailed({
        resource: 'PullRequest',
        code: 'custom',
        message: `No commits between ${input.base} and ${head}`,
      });
    }
    const issue = state.createIssue(ctx.repo, {
      title: input.title,
      body: input.body,
      user: bot,
      pull: { head, base: input.base, draft: input.draft ?? false },
    });
    return ok(shapes.pull(ctx.repo, issue), 201);
  });
  onRepo('GET', '/repos/:owner/:repo/pulls/:number', (ctx) => ok(shapes.pull(ctx.repo, pullOf(ctx))));
  onRepo('PATCH', '/repos/:owner/:repo/pulls/:number', (ctx) => {
    const issue = pullOf(ctx);
    const input = parseBody(PullUpdateBody, ctx.body);
    checkBodyLength('PullRequest', input.body);
    if (input.base !== undefined && !branchExists(ctx.repo.bareDir, input.base)) {
      throw validationFailed({ resource: 'PullRequest', field: 'base', code: 'invalid' });
    }
    if (input.title !== undefined) issue.title = input.title;
    if (input.body !== undefined) issue.body = input.body;
    if (input.state !== undefined) issue.state = input.state;
    if (input.base !== undefined && issue.pull) issue.pull.base = input.base;
    issue.updatedAt = timestamp();
    return ok(shapes.pull(ctx.repo, issue));
  });
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/files', (ctx) => {
    const { pull } = pullOf(ctx);
    const { bareDir } = ctx.repo;
    if (!pull || !branchExists(bareDir, pull.head)) return paginate([], ctx, baseUrl());
    return paginate(filesJson(ctx.repo, pull.base, pull.head), ctx, baseUrl());
  });

  // --- Reviews, review comments, review requests ---
  const requestsOf = (repo: RepoRecord, number: number): Set<string> => {
    const key = `${repo.fullName}#${number}`;
    let set = state.reviewRequests.get(key);
    if (!set) state.reviewRequests.set(key, (set = new Set()));
    return set;
  };
  const reviewCommentsOf = (ctx: RepoCtx, number: number) =>
    state.reviewComments.filter((c) => c.repo === ctx.repo.fullName && c.pullNumber === number);
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/reviews', (ctx) => {
    const pull = pullOf(ctx);
    const list = state.reviews.filter((r) => r.repo === ctx.repo.fullName && r.pullNumber === pull.number);
    return paginate(
      list.map((r) => shapes.review(ctx.repo, r)),
      ctx,
      baseUrl(),
    );
  });
  const reviewOf = (ctx: RepoCtx, number: number) => {
    const id = intParam(ctx.params.id);
    return (
      state.reviews.find((r) => r.id === id && r.repo === ctx.repo.fullName && r.pullNumber === number) ??
      throwIt(notFound())
    );
  };
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/reviews/:id', (ctx) =>
    ok(shapes.review(ctx.repo, reviewOf(ctx, pullOf(ctx).number))),
  );
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/reviews/:id/comments', (ctx) => {
    const pull = pullOf(ctx);
    const review = reviewOf(ctx, pull.number);
    const list = reviewCommentsOf(ctx, pull.number).filter((c) => c.reviewId === review.id);
    return paginate(
      list.map((c) => shapes.reviewComment(ctx.repo, c)),
      ctx,
      baseUrl(),
    );
  });
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/comments', (ctx) => {
    const from = since(ctx, 'PullRequestReviewComment'); // review comments are not edited here: made is updated
    return paginate(
      reviewCommentsOf(ctx, pullOf(ctx).number)
        .filter((c) => Date.parse(c.createdAt) >= from)
        .map((c) => shapes.reviewComment(ctx.repo, c)),
      ctx,
      baseUrl(),
    );
  });
  // A reply joins the thread of the top-level comment it answers (GitHub refuses replies to replies).
  onRepo('POST', '/repos/:owner/:repo/pulls/:number/comments/:id/replies', (ctx) => {
    const pull = pullOf(ctx);
    const { body } = parseBody(ReplyBody, ctx.body);
    checkBodyLength('PullRequestReviewComment', body);
    const id = intParam(ctx.params.id);
    const parent = reviewCommentsOf(ctx, pull.number).find((c) => c.id === id) ?? throwIt(notFound());
    if (parent.inReplyTo !== null)
      throw validationFailed({ resource: 'PullRequestReviewComment', code: 'invalid', field: 'in_reply_to' });
    const reply = { ...parent, id: state.newId(), reviewId: null, inReplyTo: parent.id, user: bot, body };
    reply.createdAt = timestamp();
    state.reviewComments.push(reply);
    return ok(shapes.reviewComment(ctx.repo, reply), 201);
  });
  // The app deletes copies of its replies that landed late (publish/landed.ts).
  onRepo('DELETE', '/repos/:owner/:repo/pulls/comments/:id', (ctx) => {
    const id = intParam(ctx.params.id);
    const i = state.reviewComments.findIndex((c) => c.repo === ctx.repo.fullName && c.id === id);
    if (i < 0) throw notFound();
    state.reviewComments.splice(i, 1);
    return { status: 204 };
  });
  onRepo('POST', '/repos/:owner/:repo/pulls/:number/requested_reviewers', (ctx) => {
    const pull = pullOf(ctx);
    const input = parseBody(ReviewersBody, ctx.body);
    for (const login of input.reviewers ?? []) {
      if (login === pull.user || state.permission(ctx.repo, login) === 'none')
        throw validationFailed({
          resource: 'PullRequest',
          code: 'custom',
          message: 'Reviews may only be requested from collaborators.',
        });
      requestsOf(ctx.repo, pull.number).add(login);
    }
    return ok(shapes.pull(ctx.repo, pull), 201);
  });
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/requested_reviewers', (ctx) =>
    ok({ users: [...requestsOf(ctx.repo, pullOf(ctx).number)].map((l) => shapes.user(l)), teams: [] }),
  );
  // GitHub lists at most 250 commits of a pull request (the oldest), paged as usual.
  onRepo('GET', '/repos/:owner/:repo/pulls/:number/commits', (ctx) => {
    const { pull } = pullOf(ctx);
    const { bareDir } = ctx.repo;
    if (!pull || !branchExists(bareDir, pull.head)) return paginate([], ctx, baseUrl());
    return paginate(
      commitsBetween(bareDir, pull.base, pull.head).slice(0, PULL_COMMITS_LIMIT),
      ctx,
      baseUrl(),
      (sha) => commitJson(ctx.repo, sha),
    );
  });

  routes.push({
    method: 'POST',
    ...compile('/graphql'),
    auth: 'graphql',
    handle: (ctx) => {
      const { query, variables } = parseBody(GraphqlBody, ctx.body);
      if (!/reviewThreads/.test(query))
        return ok({ errors: [{ message: 'the emulator answers only reviewThreads queries' }] });
      const pull = state.issue(ctx.repo!, variables.pr);
      if (!pull?.pull) return ok({ data: { repository: { pullRequest: null } } });
      // Paged as GitHub pages connections: `first` (at most 100) from the opaque cursor `after`.
      const args = /reviewThreads\(([^)]*)\)/.exec(query)?.[1] ?? '';
      const arg = (name: string): unknown => {
        const v = new RegExp(`\\b${name}:\\s*(\\$\\w+|\\d+)`).exec(args)?.[1];
        return v?.startsWith('$') ? (variables as Record<string, unknown>)[v.slice(1)] : v && Number(v);
      };
      const first = arg('first');
      if (typeof first !== 'number')
        return ok({
          errors: [
            {
              message:
                'You must provide a `first` or `last` value to properly paginate the `reviewThreads` connection.',
            },
          ],
        });
      if (first > 100)
        return ok({
          errors: [
            {
              message: `Requesting ${first} records on the \`reviewThreads\` connection exceeds the \`first\` limit of 100 records.`,
            },
          ],
        });
      const after = arg('after');
      const from = typeof after === 'string' ? cursorIndex(after) + 1 : 0;
      const roots = state.reviewComments.filter(
        (c) => c.repo === ctx.repo!.fullName && c.pullNumber === pull.number && c.inReplyTo === null,
      );
      const page = roots.slice(from, from + first);
      const nodes = page.map((c) => ({
        isResolved: state.resolvedThreads.has(c.id),
        isOutdated: shapes.reviewComment(ctx.repo!, c).line === null,
        comments: { nodes: [{ databaseId: c.id }] },
      }));
      const pageInfo = {
        hasNextPage: from + page.length < roots.length,
        hasPreviousPage: from > 0,
        startCursor: page.length > 0 ? cursorOf(from) : null,
        endCursor: page.length > 0 ? cursorOf(from + page.length - 1) : null,
      };
      return ok({
        data: {
          repository: { pullRequest: { reviewThreads: { totalCount: roots.length, nodes, pageInfo } } },
        },
      });
    },
  });

  return (input: RequestInput): Reply => {
    for (const route of routes) {
      if (route.method !== input.method) continue;
      const match = route.regex.exec(input.pathname);
      if (!match) continue;
      const params: Record<string, string> = {};
      route.names.forEach((name, i) => (params[name] = decodeURIComponent(match[i + 1] as string)));
      try {
        return route.handle(resolveAuth(route, { ...input, params }));
      } catch (err) {
        if (err instanceof ApiError) return { status: err.status, body: err.body };
        throw err;
      }
    }
    const err = auth.installationToken(input.creds) ? notFound() : badCredentials();
    return { status: err.status, body: err.body };
  };

  function resolveAuth(route: Route, ctx: Ctx): Ctx & Partial<RepoCtx> {
    if (route.auth === 'app') {
      if (ctx.creds.kind !== 'bearer' || !auth.verifyJwt(ctx.creds.value)) {
        throw new ApiError(401, {
          message: 'A JSON web token could not be decoded',
          documentation_url: DOCS,
        });
      }
      return ctx;
    }
    const token = auth.installationToken(ctx.creds);
    if (!token) throw badCredentials();
    const named =
      route.auth === 'graphql'
        ? parseBody(GraphqlBody, ctx.body).variables
        : { owner: ctx.params.owner, repo: ctx.params.repo };
    const repo = state.repo(named.owner ?? '', named.repo ?? '');
    if (!repo || repo.installationId !== token.installationId) throw notFound();
    return { ...ctx, repo };
  }
}

/** GraphQL cursors are opaque strings; the emulator's say which item they follow. */
const cursorOf = (index: number): string => Buffer.from(`cursor:v2:${index}`).toString('base64');
const cursorIndex = (cursor: string): number =>
  Number(/^cursor:v2:(\d+)$/.exec(Buffer.from(cursor, 'base64').toString('utf8'))?.[1] ?? -1);

function throwIt(err: Error): never {
  throw err;
}
