import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { schema as githubGraphql } from '@octokit/graphql-schema';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import {
  buildClientSchema,
  getVariableValues,
  Kind,
  parse,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type IntrospectionQuery,
} from 'graphql';

/**
 * GitHub's own OpenAPI description (`@octokit/openapi`: REST operations and, under `x-webhooks`, webhook
 * payloads), read as published, and the comparisons the contract tests make against it.
 */

/** A JSON schema as the description and zod's `toJSONSchema` write them (OpenAPI 3.0 adds `nullable`). */
export interface Schema {
  $ref?: string;
  type?: string | string[];
  nullable?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  [key: string]: unknown;
}

export interface Description {
  paths: Record<string, Record<string, unknown>>;
  components: Record<string, Record<string, unknown>>;
  'x-webhooks': Record<string, { post: { requestBody: { content: Record<string, { schema: Schema }> } } }>;
}

/** The descriptions this project checks against: GitHub.com and the oldest GitHub Enterprise Server it claims. */
export const DESCRIPTIONS = ['api.github.com', 'ghes-3.17'] as const;
export type DescriptionName = (typeof DESCRIPTIONS)[number];

const require = createRequire(import.meta.url);
const loaded = new Map<DescriptionName, Description>();

export function description(name: DescriptionName): Description {
  let doc = loaded.get(name);
  if (!doc) {
    const file = require.resolve(`@octokit/openapi/generated/${name}.json`);
    loaded.set(name, (doc = JSON.parse(readFileSync(file, 'utf8')) as Description));
  }
  return doc;
}

/** The payload schema GitHub documents for `event` with `action` (`issue_comment`, `created`). */
export function webhookSchema(doc: Description, event: string, action: string): Schema {
  const hook = doc['x-webhooks'][`${event.replace(/_/g, '-')}-${action}`];
  if (!hook) throw new Error(`GitHub documents no ${event}.${action} webhook`);
  return hook.post.requestBody.content['application/json']!.schema;
}

/** `#/components/schemas/x` in `doc`. */
export function resolve(doc: Description, s: Schema): Schema {
  let out = s;
  while (out.$ref) {
    const parts = out.$ref.replace(/^#\//, '').split('/');
    let at: unknown = doc;
    for (const p of parts) at = (at as Record<string, unknown>)[p.replace(/~1/g, '/').replace(/~0/g, '~')];
    if (!at) throw new Error(`unresolved ${out.$ref}`);
    out = at as Schema;
  }
  return out;
}

/** The alternatives a value of `s` may take, `allOf` merged, `$ref`s resolved. */
function variants(doc: Description, s: Schema): Schema[] {
  const r = resolve(doc, s);
  const alts = r.anyOf ?? r.oneOf;
  if (alts) return alts.flatMap((a) => variants(doc, a));
  if (r.allOf) {
    const parts = r.allOf.map((a) => resolve(doc, a));
    return [
      {
        type: parts.find((p) => p.type)?.type ?? r.type,
        nullable: r.nullable,
        properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})) as Record<string, Schema>,
        required: parts.flatMap((p) => p.required ?? []),
      },
    ];
  }
  return [r];
}

const types = (s: Schema): string[] => (Array.isArray(s.type) ? s.type : s.type ? [s.type] : []);
const isNull = (s: Schema) => types(s).includes('null') || s.nullable === true;
/** What a JSON type is as a value: integer values are numbers. */
const kinds = (s: Schema): string[] => types(s).map((t) => (t === 'integer' ? 'number' : t));

/**
 * Where `ours` (a payload schema as zod renders it) refuses something `theirs` (GitHub's description)
 * allows: a property ours requires that GitHub does not always send, a null GitHub may send that ours
 * refuses, or a type of value ours does not take. `assumed` names top-level properties GitHub sends to
 * every app delivery though its description, shared with repository webhooks, marks them optional.
 */
export function stricterThanGitHub(
  doc: Description,
  ours: Schema,
  theirs: Schema,
  at = '',
  assumed: readonly string[] = [],
): string[] {
  const alts = variants(doc, theirs);
  const oursAlts = ours.anyOf ?? [ours];
  const found: string[] = [];
  if (alts.some(isNull) && !oursAlts.some(isNull)) found.push(`${at || 'payload'} may be null`);
  const values = alts.filter((a) => !(types(a).length === 1 && types(a)[0] === 'null'));
  const oursKinds = new Set(oursAlts.flatMap(kinds));
  for (const v of values) {
    if (oursKinds.size === 0) continue; // ours takes any value here
    const missing = kinds(v).filter((k) => k !== 'null' && !oursKinds.has(k));
    if (missing.length > 0) found.push(`${at} may be ${missing.join(' or ')}`);
  }
  for (const o of oursAlts) {
    if (o.properties) {
      const objects = values.filter((v) => kinds(v).includes('object') || v.properties);
      for (const [name, sub] of Object.entries(o.properties)) {
        const path = at ? `${at}.${name}` : name;
        const withIt = objects.filter((v) => v.properties?.[name]);
        if (
          (o.required ?? []).includes(name) &&
          !(at === '' && assumed.includes(name)) &&
          objects.some((v) => !(v.required ?? []).includes(name))
        )
          found.push(`${path} is not always sent`);
        for (const v of withIt) found.push(...stricterThanGitHub(doc, sub, v.properties![name]!, path));
      }
    }
    if (o.items)
      for (const v of values)
        if (v.items) found.push(...stricterThanGitHub(doc, o.items, v.items, `${at}[]`));
  }
  return [...new Set(found)];
}

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Schema;
}
interface Operation {
  parameters?: (Parameter | { $ref: string })[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}

/** A request as sent (the emulator's record of it). */
export interface SentRequest {
  method: string;
  rawPath: string;
  query: string;
  body: unknown;
  status: number;
  response?: { body: unknown; headers?: Record<string, string> };
  /** The answer was injected by the test (fault injection), not given by the emulator. */
  fault?: boolean;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head'];

/**
 * Checks requests and the answers to them against one description: each request must be an operation
 * the description has, with its path and query parameters and body as documented; each answer's body
 * must be what the operation documents for that status.
 */
// ajv-formats is CommonJS: its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export class OperationChecker {
  private readonly ajv: Ajv;
  private readonly routes: { method: string; template: string; pattern: RegExp; literal: number }[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(
    private readonly name: DescriptionName,
    private readonly doc = description(name),
  ) {
    this.ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
    addFormats(this.ajv);
    // GitHub's own formats: `owner/name`, and one `timestamp` it leaves undefined.
    this.ajv.addFormat('repo.nwo', /^[^/\s]+\/[^/\s]+$/);
    this.ajv.addFormat('timestamp', true);
    this.ajv.addSchema(withoutNullable(withErrata(structuredClone(doc))) as object, name);
    for (const [template, item] of Object.entries(doc.paths))
      for (const method of METHODS.filter((m) => item[m])) {
        const segments = template.split('/');
        const pattern = new RegExp(
          `^${segments.map((s) => (/^\{\w+\}$/.test(s) ? '([^/]+)' : s.replace(/[.$^*+?()[\]|]/g, '\\$&'))).join('/')}$`,
        );
        this.routes.push({
          method,
          template,
          pattern,
          literal: segments.filter((s) => !s.startsWith('{')).length,
        });
      }
  }

  /** The operation a method and path name: the template with the most literal segments wins. */
  match(method: string, rawPath: string): { template: string; params: Record<string, string> } | null {
    const found = this.routes
      .filter((r) => r.method === method.toLowerCase() && r.pattern.test(rawPath))
      .sort((a, b) => b.literal - a.literal)[0];
    if (!found) return null;
    const names = [...found.template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    const values = found.pattern.exec(rawPath)!.slice(1);
    return {
      template: found.template,
      params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(values[i]!)])),
    };
  }

  private operation(template: string, method: string): Operation {
    return this.doc.paths[template]![method.toLowerCase()] as Operation;
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.compiled.get(pointer);
    if (!v) this.compiled.set(pointer, (v = this.ajv.compile({ $ref: `${this.name}#${pointer}` })));
    return v;
  }

  private errors(pointer: string, value: unknown): string[] {
    const v = this.validator(pointer);
    return v(value) ? [] : (v.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
  }

  /** What is wrong with a request, as `METHOD /template: problem` lines; none when it is as documented. */
  checkRequest(r: SentRequest): string[] {
    const m = this.match(r.method, r.rawPath);
    const where = `${r.method} ${m?.template ?? r.rawPath}`;
    if (!m) return [`${where}: no such operation in ${this.name}`];
    const op = this.operation(m.template, r.method);
    const base = `/paths/${pointerEscape(m.template)}/${r.method.toLowerCase()}`;
    const params = (op.parameters ?? []).map((p) => resolve(this.doc, p as Schema) as unknown as Parameter);
    const query = new URLSearchParams(r.query);
    const found: string[] = [];
    for (const p of params) {
      const raw =
        p.in === 'path' ? m.params[p.name] : p.in === 'query' ? (query.get(p.name) ?? undefined) : '';
      if (p.in !== 'path' && p.in !== 'query') continue;
      if (raw === undefined) {
        if (p.required) found.push(`${where}: ${p.in} parameter ${p.name} missing`);
        continue;
      }
      if (p.schema && !this.ajv.validate(p.schema, coerce(raw, resolve(this.doc, p.schema))))
        found.push(`${where}: ${p.in} parameter ${p.name}=${raw} is not ${JSON.stringify(p.schema)}`);
    }
    for (const key of query.keys())
      if (!params.some((p) => p.in === 'query' && p.name === key))
        found.push(`${where}: undocumented query parameter ${key}`);
    const content = op.requestBody?.content['application/json'];
    if (r.body === undefined) {
      if (op.requestBody?.required) found.push(`${where}: body missing`);
    } else if (!content) found.push(`${where}: takes no JSON body`);
    else
      found.push(
        ...this.errors(`${base}/requestBody/content/application~1json/schema`, r.body).map(
          (e) => `${where}: body ${e}`,
        ),
      );
    return found;
  }

  /**
   * What is wrong with the answer to a request: a success the operation does not document, or a body
   * other than the one documented for its status. Error statuses GitHub leaves undocumented (401, 500)
   * are not checked.
   */
  checkResponse(r: SentRequest): { checked: boolean; problems: string[] } {
    const m = this.match(r.method, r.rawPath);
    // A media type other than JSON (a file's raw bytes) is no JSON the description could describe.
    const type = r.response?.headers?.['content-type'];
    if (!m || !r.response || (type && !/json/.test(type))) return { checked: false, problems: [] };
    const where = `${r.method} ${m.template} → ${r.status}`;
    const op = this.operation(m.template, r.method);
    const documented = op.responses[String(r.status)];
    if (!documented)
      return { checked: r.status < 400, problems: r.status < 400 ? [`${where}: undocumented status`] : [] };
    const pointer = `/paths/${pointerEscape(m.template)}/${r.method.toLowerCase()}/responses/${r.status}`;
    const json = resolve(this.doc, documented as Schema) as { content?: Record<string, unknown> };
    if (!json.content?.['application/json'])
      return {
        checked: true,
        problems:
          r.response.body === undefined || r.status >= 400 ? [] : [`${where}: documented without a body`],
      };
    const schemaAt = documented.content ? `${pointer}/content/application~1json/schema` : null;
    if (!schemaAt) return { checked: true, problems: [] };
    return { checked: true, problems: this.errors(schemaAt, r.response.body).map((e) => `${where}: ${e}`) };
  }
}

/**
 * Where the REST description says what GitHub does not do, each with the evidence. An outdated review
 * comment's `line` and `position` are null (GitHub's webhook description of the same comment has them
 * integer or null). An installation's account is a user or an enterprise: the list of installations has
 * `allOf` both, where the `installation` schema it copies has `anyOf`.
 */
const ERRATA: { at: string; fix: (s: Schema) => void }[] = [
  ...[
    'pull-request-review-comment/properties/line',
    'pull-request-review-comment/properties/position',
    'review-comment/properties/line',
  ].map((at) => ({ at: `/components/schemas/${at}`, fix: (s: Schema) => (s.nullable = true) })),
  {
    at: '/paths/~1app~1installations/get/responses/200/content/application~1json/schema/items/properties/account',
    fix: (s) => {
      s.anyOf = s.allOf;
      delete s.allOf;
    },
  },
];

function withErrata(doc: Description): Description {
  for (const { at, fix } of ERRATA) fix(resolve(doc, { $ref: `#${at}` }));
  return doc;
}

/** OpenAPI 3.0's `nullable: true` as JSON Schema says it (ajv takes `nullable` only beside a `type`). */
function withoutNullable(node: unknown): unknown {
  if (Array.isArray(node)) node.forEach(withoutNullable);
  else if (node && typeof node === 'object') {
    const s = node as Schema;
    for (const v of Object.values(s)) withoutNullable(v);
    if (s.nullable === true) {
      delete s.nullable;
      if (typeof s.type === 'string') {
        s.type = [s.type, 'null'];
        if (Array.isArray(s.enum)) s.enum = [...(s.enum as unknown[]), null];
      } else {
        const rest = { ...s };
        for (const k of Object.keys(s)) if (k !== 'description') delete s[k];
        s.anyOf = [rest, { type: 'null' }];
      }
    }
  }
  return node;
}

const pointerEscape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** A query or path value as the type its schema names. */
function coerce(raw: string, s: Schema): unknown {
  const t = types(s)[0];
  if (t === 'integer' || t === 'number') return Number(raw);
  if (t === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : raw;
  return raw;
}

const graphqlSchema = (() => {
  let built: GraphQLSchema | undefined;
  return () => (built ??= buildClientSchema(githubGraphql.json as unknown as IntrospectionQuery));
})();

/** What is wrong with a GraphQL request (`{query, variables}`) against GitHub's public schema. */
export function checkGraphql(body: unknown): string[] {
  const { query, variables } = (body ?? {}) as { query?: unknown; variables?: Record<string, unknown> };
  if (typeof query !== 'string') return ['POST /graphql: no query'];
  let document: DocumentNode;
  try {
    document = parse(query);
  } catch (e) {
    return [`POST /graphql: ${String(e)}`];
  }
  const schema = graphqlSchema();
  const found = validate(schema, document).map((e) => `POST /graphql: ${e.message}`);
  for (const def of document.definitions)
    if (def.kind === Kind.OPERATION_DEFINITION) {
      const { errors } = getVariableValues(schema, def.variableDefinitions ?? [], variables ?? {});
      found.push(...(errors ?? []).map((e) => `POST /graphql: ${e.message}`));
    }
  return found;
}

/** What `checkRecorded` found: the operations used, how many requests and answers it checked, what is wrong. */
export interface RecordCheck {
  operations: string[];
  requests: number;
  responses: number;
  problems: string[];
}

const checkers = new Map<DescriptionName, OperationChecker>();

/**
 * Every REST and GraphQL request of an emulator's record against each description, and every answer
 * the emulator gave. Git's smart HTTP (no JSON answer recorded) is another protocol; an answer the test
 * injected (a 503, a rate limit) is the test's, not the emulator's, so only its request is checked.
 * The same requests are checked against each description and counted once; problems are prefixed with
 * the description that has them.
 */
export function checkRecorded(
  record: readonly SentRequest[],
  names: readonly DescriptionName[] = DESCRIPTIONS,
): RecordCheck {
  const sent = record.filter((r) => r.response);
  const operations = new Set<string>();
  const problems = new Set<string>();
  let responses = 0;
  for (const r of sent.filter((r) => r.rawPath === '/graphql')) {
    operations.add('POST /graphql');
    for (const p of checkGraphql(r.body)) problems.add(p);
  }
  const rest = sent.filter((r) => r.rawPath !== '/graphql');
  for (const name of names) {
    let checker = checkers.get(name);
    if (!checker) checkers.set(name, (checker = new OperationChecker(name)));
    let answers = 0;
    for (const r of rest) {
      for (const p of checker.checkRequest(r)) problems.add(`${name}: ${p}`);
      operations.add(`${r.method} ${checker.match(r.method, r.rawPath)?.template ?? r.rawPath}`);
      if (r.fault) continue;
      const answer = checker.checkResponse(r);
      if (answer.checked) answers += 1;
      for (const p of answer.problems) problems.add(`${name}: ${p}`);
    }
    responses = Math.max(responses, answers);
  }
  return { operations: [...operations], requests: sent.length, responses, problems: [...problems] };
}
