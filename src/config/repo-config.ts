import { Lexer, parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { Config } from './config.js';
import { nearest } from './did-you-mean.js';
import { parsePathPattern } from './path-patterns.js';

/**
 * When the judge builds its image from scratch: `changed` reuses an image whose content key (the
 * Dockerfile and every file it copies, see environment/docker-context.ts) matches, so the test containers still run
 * an image that is exactly what this Dockerfile and worktree produce; `always` rebuilds with --no-cache
 * (repository config `verify: {rebuild: always}`), for repositories whose builds fetch moving targets.
 */
export const RebuildPolicySchema = z.enum(['changed', 'always']);
export type RebuildPolicy = z.infer<typeof RebuildPolicySchema>;

export const REPO_CONFIG_PATH = '.github/agenticfix.yml';
/**
 * The schema's `$id`: where editors fetch it (`# yaml-language-server: $schema=…`), the file
 * schema/agenticfix.schema.json on the project's default branch (app.yml's `url`).
 */
export const REPO_CONFIG_SCHEMA_URL =
  'https://raw.githubusercontent.com/agenticfix/agenticfix/main/schema/agenticfix.schema.json';
/** Checked against the contents API's `size` before anything is decoded or parsed. */
export const REPO_CONFIG_MAX_BYTES = 64 * 1024;
export const DEFAULT_TEST_ARGV = ['python3', '-m', 'pytest', '-q'];

/**
 * Files that decide what a CI run executes before or around the tests (build, install, test-collection
 * and CI configuration files). The app's branch lives in the repository, so workflows triggered by its
 * push run them with the repository's secrets.
 */
export const DEFAULT_CI_ENTRY_POINTS = [
  // Python
  '**/conftest.py',
  'setup.py',
  'setup.cfg',
  'pyproject.toml',
  'tox.ini',
  'noxfile.py',
  'pytest.ini',
  'requirements*.txt',
  // JavaScript
  '**/package.json',
  '.npmrc',
  '.yarnrc',
  '.yarnrc.yml',
  // Make, containers, hooks
  '**/Makefile',
  '**/*.mk',
  '**/Dockerfile',
  'docker-compose*.yml',
  'docker-compose*.yaml',
  'compose*.yml',
  'compose*.yaml',
  '.pre-commit-config.yaml',
  // Ruby, JVM, Go, Rust
  'Gemfile',
  'Rakefile',
  '*.gemspec',
  '**/build.gradle*',
  'settings.gradle*',
  'gradlew',
  'gradle/wrapper',
  '**/pom.xml',
  '.mvn',
  'go.mod',
  'Cargo.toml',
  '**/build.rs',
  // CI configuration (workflows themselves are never pushed)
  '.github/actions',
  '.gitlab-ci.yml',
  '.circleci',
  '.travis.yml',
  'Jenkinsfile',
  'azure-pipelines.yml',
  '.buildkite',
];

/** Paths (repo-relative, `/`-separated, no `..`): a file or a directory prefix. */
const repoPath = z
  .string()
  .min(1)
  .refine(
    (p) => !p.startsWith('/') && !p.split('/').includes('..'),
    'must be relative and inside the repository',
  );

/** A path pattern (see src/config/path-patterns.ts), normalised; refused with its reason otherwise. */
const pathPattern = z.string().transform((entry, ctx) => {
  const r = parsePathPattern(entry);
  if (r.ok) return r.pattern;
  ctx.addIssue({ code: 'custom', message: r.error, input: entry });
  return z.NEVER;
});

const CI_POLICY = z.enum(['flag', 'block']);
const CI_ENTRY_POINTS = z
  .union([
    CI_POLICY.transform((policy) => ({ paths: DEFAULT_CI_ENTRY_POINTS, policy })),
    z.strictObject({
      paths: z.array(pathPattern).default(DEFAULT_CI_ENTRY_POINTS),
      policy: CI_POLICY.default('flag'),
    }),
  ])
  .default({ paths: DEFAULT_CI_ENTRY_POINTS, policy: 'flag' });

const d = <T extends z.ZodType>(schema: T, description: string): T => schema.describe(description);

/** Per-repository settings, `.github/agenticfix.yml` at the run's base commit; the descriptions also document its JSON Schema (repoConfigJsonSchema). */
const REPO_CONFIG_FIELDS = z.strictObject({
  label: d(z.string().min(1).max(50).optional(), "The trigger label (default: the app's AGENTICFIX_LABEL)."),
  test: d(
    z.array(z.string().min(1)).min(1).default(DEFAULT_TEST_ARGV),
    'The test command as an argv (never a shell).',
  ),
  dockerfile: d(
    repoPath.optional(),
    "The maintainer's Dockerfile, used instead of asking the model to write one.",
  ),
  model: d(
    z.string().min(1).max(100).optional(),
    "The model; must be on the operator's AGENTICFIX_MODEL_ALLOWLIST.",
  ),
  models: d(
    z.array(z.string().min(1).max(100)).min(1).max(50).optional(),
    "Models the attempts take in turn (attempt n: entry (n-1) mod length), instead of `model`; each on the operator's AGENTICFIX_MODEL_ALLOWLIST.",
  ),
  budgets: d(
    z
      .strictObject({
        tokens: z.number().int().positive().optional(),
        requests: z.number().int().positive().optional(),
        tool_calls: z.number().int().positive().optional(),
        time_s: z.number().int().positive().optional(),
      })
      .default({}),
    "A run's budgets; each at most the operator's ceiling.",
  ),
  protected_paths: d(
    z.array(pathPattern).default([]),
    'Path patterns the agent may not change and the app never pushes.',
  ),
  guidance_file: d(
    repoPath.optional(),
    "The repository's guidance for agents, instead of AGENTS.md / .github/copilot-instructions.md.",
  ),
  ci_entry_points: d(
    CI_ENTRY_POINTS,
    'Files that decide what CI executes: `flag` warns on a patch that touches one, `block` does not push it.',
  ),
  publish_unverified: d(z.boolean().default(false), 'Open a draft pull request for unverified results too.'),
  verify: d(
    z.strictObject({ rebuild: RebuildPolicySchema.default('changed') }).default({ rebuild: 'changed' }),
    'When the judge builds its image from scratch: `changed` reuses an image of the same content, `always` rebuilds.',
  ),
  test_timeout_s: d(
    z.number().int().positive().optional(),
    "The longest a test run may take here, within the operator's AGENTICFIX_MAX_TEST_TIMEOUT_S.",
  ),
  revise_on: d(
    z
      .array(z.enum(['command', 'changes_requested', 'mention']))
      .default(['command'])
      .transform((l) => [...new Set(l)]),
    "What starts a revision of the app's draft pull request (from people with write access).",
  ),
  max_revisions: d(
    z.number().int().min(0).optional(),
    "Revisions per pull request; default and ceiling: the operator's AGENTICFIX_MAX_REVISIONS.",
  ),
  max_cost_usd: d(
    z.number().positive().finite().optional(),
    "USD a run may spend on model requests; default and ceiling: the operator's AGENTICFIX_MAX_COST_USD.",
  ),
  attempts: d(
    z.number().int().min(1).default(1),
    "Independent attempts per run, each repaired and judged on its own; the smallest verified patch is published. At most the operator's AGENTICFIX_MAX_ATTEMPTS.",
  ),
  attempts_policy: d(
    z.enum(['smallest_verified', 'first_verified']).default('smallest_verified'),
    '`smallest_verified` runs every attempt and publishes the smallest verified patch; `first_verified` stops at the first verified one.',
  ),
  ci_feedback: d(
    z
      .strictObject({
        enabled: z.boolean().default(false),
        max_rounds: d(
          z.number().int().min(1).optional(),
          'Revisions started by checks per pull request; default and ceiling: AGENTICFIX_CI_FEEDBACK_MAX_ROUNDS.',
        ),
        apps: d(
          z
            .array(
              z
                .string()
                .regex(/^[a-z0-9][a-z0-9-]{0,99}$/, 'an app slug')
                .max(100),
            )
            .max(50)
            .optional(),
          "Check apps whose failing runs count (default: the operator's AGENTICFIX_CHECK_APPS, else GitHub Actions only; any other CI app must be named here).",
        ),
      })
      .default({ enabled: false }),
    "Failing checks on the head of the app's branch start a revision.",
  ),
});
const REPO_CONFIG_SCHEMA = REPO_CONFIG_FIELDS.refine((rc) => !(rc.model && rc.models), {
  path: ['models'],
  message: 'set `model` or `models`, not both',
});

/**
 * The JSON Schema of `.github/agenticfix.yml` as a person writes it, for editors (schema/agenticfix.schema.json,
 * written by scripts/settings-doc.mjs and kept in sync by a test).
 */
export function repoConfigJsonSchema(): Record<string, unknown> {
  const { $schema, ...rest } = z.toJSONSchema(REPO_CONFIG_SCHEMA, { io: 'input', unrepresentable: 'any' });
  return {
    $schema,
    $id: REPO_CONFIG_SCHEMA_URL,
    title: `AgenticFix repository configuration (${REPO_CONFIG_PATH})`,
    ...rest,
  };
}

type SchemaNode = { properties?: Record<string, SchemaNode>; items?: SchemaNode; anyOf?: SchemaNode[] };
let jsonSchema: SchemaNode | undefined;

/** The keys the file may have at `path` (an object's, or a union's object branch), from the JSON Schema. */
function keysAt(path: PropertyKey[]): string[] {
  let node: SchemaNode | undefined = (jsonSchema ??= repoConfigJsonSchema() as SchemaNode);
  const props = (n: SchemaNode | undefined) =>
    n?.properties ?? n?.anyOf?.find((o) => o.properties)?.properties;
  for (const key of path) node = typeof key === 'number' ? node?.items : props(node)?.[String(key)];
  return Object.keys(props(node) ?? {});
}

/** One line per problem, naming the key; an unknown key with the nearest known one. */
function issueLines(issues: z.core.$ZodIssue[]): string[] {
  return issues.flatMap((i) => {
    if (i.code !== 'unrecognized_keys') return [`- \`${i.path.join('.') || '(root)'}\`: ${i.message}`];
    return i.keys.map((key) => {
      const near = nearest(key, keysAt(i.path));
      const hint = near ? ` (did you mean \`${[...i.path, near].join('.')}\`?)` : '';
      return `- \`${[...i.path, key].join('.')}\`: unknown key${hint}`;
    });
  });
}

type ParsedRepoConfig = z.infer<typeof REPO_CONFIG_SCHEMA>;
/** The repository's settings, with the operator's defaults filled in. */
export type RepoConfig = Omit<ParsedRepoConfig, 'max_revisions' | 'max_cost_usd' | 'ci_feedback'> & {
  max_revisions: number;
  /** null: no cost limit (the operator set none and neither did the repository). */
  max_cost_usd: number | null;
  ci_feedback: Omit<ParsedRepoConfig['ci_feedback'], 'max_rounds'> & { max_rounds: number };
};

export type RepoConfigResult = { ok: true; config: RepoConfig } | { ok: false; error: string };

/** The run's limits with the repository's `test_timeout_s` as the ceiling, where it is lower than the operator's. */
export function repoLimits(
  limits: Config['limits'],
  rc: Pick<RepoConfig, 'test_timeout_s'>,
): Config['limits'] {
  if (rc.test_timeout_s === undefined) return limits;
  return { ...limits, maxTestTimeoutMs: Math.min(limits.maxTestTimeoutMs, rc.test_timeout_s * 1000) };
}

/** What the operator allows a repository or a command to choose. */
export type OperatorLimits = Pick<Config, 'ceilings'> & { model: Pick<Config['model'], 'allowlist'> };

/** Budgets, limits and a model a repository config or a command asks for. */
interface Asked {
  tokens?: number;
  requests?: number;
  tool_calls?: number;
  time_s?: number;
  max_revisions?: number;
  max_rounds?: number;
  max_cost_usd?: number;
  attempts?: number;
  model?: string;
  models?: string[];
}

/** Every asked value the operator does not allow, with the reason (ceilings are never raised, only refused). */
function refusals(limits: OperatorLimits, asked: Asked): { key: keyof Asked; reason: string }[] {
  const c = limits.ceilings;
  const max: Record<Exclude<keyof Asked, 'model' | 'models'>, [number, string]> = {
    tokens: [c.tokens, 'tokens'],
    requests: [c.requests, 'model requests'],
    tool_calls: [c.toolCalls, 'tool calls'],
    time_s: [Math.floor(c.timeMs / 1000), 'seconds'],
    max_revisions: [c.revisions, 'revisions per pull request'],
    max_rounds: [c.ciRounds, 'CI feedback rounds per pull request'],
    max_cost_usd: [c.costUsd ?? Infinity, 'USD'],
    attempts: [c.attempts, 'attempts'],
  };
  const out: { key: keyof Asked; reason: string }[] = [];
  for (const [key, [ceiling, unit]] of Object.entries(max) as [keyof typeof max, [number, string]][]) {
    const v = asked[key];
    if (v !== undefined && v > ceiling)
      out.push({ key, reason: `${v} exceeds the operator's ceiling of ${ceiling} ${unit}` });
  }
  const allowed = limits.model.allowlist;
  const which = allowed.length ? `: ${allowed.map((m) => `\`${m}\``).join(', ')}` : ' (none)';
  for (const key of ['model', 'models'] as const)
    for (const m of [asked[key] ?? []].flat().filter((m) => !allowed.includes(m)))
      out.push({ key, reason: `\`${m}\` is not among the operator's allowed models${which}` });
  return out;
}

/** Why a rerun command's `budget=`/`model=`/`attempts=` is refused (`budget=… exceeds …; model=…`), or null. */
export function commandRefusal(
  limits: OperatorLimits,
  asked: { budget?: number; model?: string; attempts?: number },
): string | null {
  const refused = refusals(limits, { tokens: asked.budget, model: asked.model, attempts: asked.attempts });
  if (refused.length === 0) return null;
  return refused.map((r) => `${r.key === 'tokens' ? 'budget' : r.key}=${r.reason}`).join('; ');
}

/**
 * The shape a config may have before it is parsed: `[`/`{` nesting, indentation and lexer tokens (its
 * own settings need 3 levels, a few columns and a few hundred tokens; 5000 tokens are a list of ~800
 * protected paths). The parser spends 10-15 µs a token and more on deep or wide documents: a 40 KB
 * nest of `[` blocked the event loop for 2 s, 64 KB of keys for 0.5-1 s. The lexer is linear and this
 * pass stops at the first limit crossed, so a config costs the event loop at most ~100 ms.
 */
export const REPO_CONFIG_LIMITS = { depth: 16, indent: 64, tokens: 5000 };

/** Why `text` is refused before parsing, or null. */
function overLimits(text: string): string | null {
  const { depth: maxDepth, indent: maxIndent, tokens: maxTokens } = REPO_CONFIG_LIMITS;
  let depth = 0;
  let tokens = 0;
  for (const token of new Lexer().lex(text)) {
    if (++tokens > maxTokens) return `has more than ${maxTokens} YAML tokens`;
    if (token === '[' || token === '{') {
      if (++depth > maxDepth) return `nests \`[\`/\`{\` deeper than ${maxDepth} levels`;
    } else if (token === ']' || token === '}') depth--;
  }
  for (const [spaces] of text.matchAll(/^ +(?=\S)/gm))
    if (spaces.length > maxIndent) return `is indented deeper than ${maxIndent} columns`;
  return null;
}

/** Parses the file's text; `null` (no file) gives the defaults. */
export function parseRepoConfig(text: string | null, limits: OperatorLimits): RepoConfigResult {
  let raw: unknown = {};
  if (text !== null) {
    const over = overLimits(text);
    if (over) return { ok: false, error: `${REPO_CONFIG_PATH} ${over}; nothing was parsed.` };
    try {
      // No aliases: a config needs none, and each one can multiply the document (billion laughs).
      raw = parseYaml(text, { maxAliasCount: 0 }) ?? {};
    } catch (e) {
      return { ok: false, error: `${REPO_CONFIG_PATH} is not valid YAML: ${(e as Error).message}` };
    }
  }
  const parsed = REPO_CONFIG_SCHEMA.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      error: `${REPO_CONFIG_PATH} is invalid:\n${issueLines(parsed.error.issues).join('\n')}`,
    };
  }
  const rc = parsed.data;
  const refused = refusals(limits, {
    ...rc.budgets,
    model: rc.model,
    models: rc.models,
    max_revisions: rc.max_revisions,
    max_rounds: rc.ci_feedback.max_rounds,
    max_cost_usd: rc.max_cost_usd,
    attempts: rc.attempts,
  });
  if (refused.length > 0) {
    const name = (key: keyof Asked) =>
      key in rc.budgets ? `budgets.${key}` : key === 'max_rounds' ? 'ci_feedback.max_rounds' : key;
    const lines = refused.map((r) => `- \`${name(r.key)}\`: ${r.reason}`);
    return {
      ok: false,
      error: `${REPO_CONFIG_PATH} asks for more than the operator allows:\n${lines.join('\n')}`,
    };
  }
  return {
    ok: true,
    config: {
      ...rc,
      max_revisions: rc.max_revisions ?? limits.ceilings.revisions,
      max_cost_usd: rc.max_cost_usd ?? limits.ceilings.costUsd,
      ci_feedback: { ...rc.ci_feedback, max_rounds: rc.ci_feedback.max_rounds ?? limits.ceilings.ciRounds },
    },
  };
}
