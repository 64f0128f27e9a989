import { z } from 'zod';
import type { TestResult } from './types.js';
import { mergeResults, relativeToRoot } from './types.js';

// Only the fields the judge reads; the json reporter writes more, so these schemas are deliberately loose.
const Test = z.object({ title: z.string(), fullTitle: z.string(), file: z.string().optional() });
const MochaJson = z.object({
  stats: z.object({}).loose(),
  passes: z.array(Test),
  failures: z.array(Test),
  pending: z.array(Test),
});

const id = (t: z.infer<typeof Test>) => (t.file ? `${relativeToRoot(t.file)} > ${t.fullTitle}` : t.fullTitle);

/** Results of mocha's json reporter. A failed hook ('"before each" hook for …') is an error. */
export function parseMochaJson(json: string): TestResult[] | null {
  const start = json.indexOf('{');
  if (start < 0) return null;
  let data: unknown;
  try {
    data = JSON.parse(json.slice(start));
  } catch {
    return null;
  }
  const parsed = MochaJson.safeParse(data);
  if (!parsed.success) return null;
  const { passes, failures, pending } = parsed.data;
  return mergeResults([
    ...passes.map((t) => ({ id: id(t), status: 'passed' as const })),
    ...pending.map((t) => ({ id: id(t), status: 'skipped' as const })),
    ...failures.map((t) => ({
      id: id(t),
      status: /"[^"]+" hook\b/.test(t.title) ? ('error' as const) : ('failed' as const),
    })),
  ]);
}
