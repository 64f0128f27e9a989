import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import ts from 'typescript';

/**
 * `exported(...args)` of one source file, computed in a worker thread that is stopped after `ms`: a
 * call that never ends (a regular expression backtracking for hours) holds its thread, which a test in
 * that thread could not stop (its timers never fire). The file is transpiled alone: its imports of
 * other project files are empty objects, so the function must not use them.
 */
export async function callInWorker(
  source: string,
  exported: string,
  args: unknown[],
  ms: number,
): Promise<unknown> {
  const js = ts.transpileModule(readFileSync(source, 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const worker = new Worker(
    `const module = { exports: {} }; const exports = module.exports;\n` +
      `const require = (m) => (m.startsWith('node:') ? globalThis.require(m) : {});\n${js}\n` +
      `const { parentPort, workerData } = globalThis.require('node:worker_threads');\n` +
      `parentPort.postMessage(exports[workerData.exported](...workerData.args) ?? null);`,
    { eval: true, workerData: { exported, args } },
  );
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    });
  } finally {
    clearTimeout(timer);
    await worker.terminate();
  }
}
