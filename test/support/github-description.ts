import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

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
