import { fileURLToPath } from 'node:url';
import { gitignoreRules } from '../../../src/tools/gitignore.js';
import { callInWorker } from '../../support/in-worker.js';

const SOURCE = fileURLToPath(new URL('../../../src/tools/gitignore.ts', import.meta.url));

// Review of the red team's fix (its .gitignore rules no longer regular expressions): its own trimming was
// (`/(?<!\\)( +)$/`, `/\/+$/`), which tries every start of a run that does not reach the line's end. A
// repository's .gitignore line of 200,000 spaces and an `x` held the event loop about 35 s, per
// directory holding one, at the model's first listing or search. Trailing runs are now scanned.
it('long runs of spaces or slashes in a .gitignore line are read at once', async () => {
  const text = `${' '.repeat(200_000)}x\n${'/'.repeat(200_000)}y\n`;
  // Was: no answer within 10 s (the worker was still trimming when stopped).
  const rules = (await callInWorker(SOURCE, 'gitignoreRules', [text], 10_000)) as { glob: string }[];
  expect(rules.map((r) => r.glob.length)).toEqual([200_001, 200_000]);
});

it('trailing spaces are dropped unless the last is escaped, trailing slashes mean directories', () => {
  expect(gitignoreRules('log.txt   \nkeep\\ \nbuild//\n/top\n   \n')).toEqual([
    { glob: 'log.txt', negated: false, dirOnly: false, anchored: false },
    { glob: 'keep\\ ', negated: false, dirOnly: false, anchored: false },
    { glob: 'build', negated: false, dirOnly: true, anchored: false },
    { glob: 'top', negated: false, dirOnly: false, anchored: true },
  ]);
});
