import type { TestResult, TestStatus } from './types.js';
import { mergeResults } from './types.js';

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#\d+|\w+);/g, (m, e: string) => {
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return ENTITIES[e] ?? m;
  });
}

function attributes(s: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of s.matchAll(/([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
    out[m[1]!] = unescapeXml(m[2] ?? m[3] ?? '');
  }
  return out;
}

/**
 * pytest node id from a junit testcase. With `junit_family=xunit1` pytest writes the file; the
 * classname is the dotted module path followed by any class names.
 */
function pytestId(a: Record<string, string>): string {
  const name = a.name ?? '';
  const classname = a.classname ?? '';
  const file = a.file;
  if (!file) return classname ? `${classname}::${name}` : name;
  if (!classname) return file; // collection error: the module itself failed
  const module = file.replace(/\.py$/, '').replace(/\//g, '.');
  const rest = classname.startsWith(`${module}.`) ? classname.slice(module.length + 1) : '';
  return [file, ...(rest ? rest.split('.') : []), name].join('::');
}

/** Test cases of a junit XML report. Ids follow pytest node ids when `pytest` is true. */
export function parseJunitXml(xml: string, opts: { pytest: boolean }): TestResult[] {
  const results: TestResult[] = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const a = attributes(m[1] ?? '');
    const body = m[2] ?? '';
    const status: TestStatus = /<error\b/.test(body)
      ? 'error'
      : /<failure\b/.test(body)
        ? 'failed'
        : /<skipped\b/.test(body)
          ? 'skipped'
          : 'passed';
    const id = opts.pytest ? pytestId(a) : [a.classname, a.name].filter(Boolean).join('::');
    results.push({ id, status });
  }
  return mergeResults(results);
}
