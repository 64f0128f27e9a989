import { execa } from 'execa';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../scripts/check-imports.mjs', import.meta.url));
const check = (dir?: string) => execa('node', [SCRIPT, ...(dir ? [dir] : [])], { reject: false });

describe('the house from its imports (scripts/check-imports.mjs)', () => {
  it('src/ has no circle and no arrow that runs back up', async () => {
    const r = await check();
    expect(JSON.parse(r.stdout)).toMatchObject({ circles: 0, back_arrows: 0 });
    expect(r.exitCode).toBe(0);
  });

  // The emulator and the scripted model are for trying and testing: only entry points (cli/), the demo and
  // the benchmarks start them; no pipeline stage depends on them.
  it('no stage imports the emulator', () => {
    const src = fileURLToPath(new URL('../../src/', import.meta.url));
    const offenders = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !/^(emulator|cli|demo|bench)\//.test(f))
      .filter((f) => /from '(\.\.\/)+emulator\//.test(readFileSync(path.join(src, f), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('finds a circle of files and two folders that import each other', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'agenticfix-imports-'));
    try {
      const put = (file: string, text: string) => {
        mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        writeFileSync(path.join(dir, file), text);
      };
      put('a/one.ts', "import type { T } from './two.js';\nexport const one = 1;\n");
      put('a/two.ts', "import { one } from './one.js';\nexport type T = typeof one;\n");
      put('a/up.ts', "export { b } from '../b/b.js';\n");
      put('b/b.ts', "import '../a/one.js';\nexport const b = 2;\n");
      put('c/c.ts', "import { b } from '../b/b.js';\nexport const c = b;\n");
      const r = await check(dir);
      expect(r.exitCode).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({
        circles: 1,
        back_arrows: 1,
        details: { circles: [['a/one.ts', 'a/two.ts']], folder_loops: [['a -> b', 'b -> a']] },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
