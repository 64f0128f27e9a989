import { fileURLToPath } from 'node:url';
import { globMatches, matchingPattern } from '../../../src/config/path-patterns.js';
import { callInWorker } from '../../support/in-worker.js';

/**
 * Red team: a repository's `protected_paths` and `ci_entry_points` became regular expressions, one
 * `[^/]*` per `*`. `a*a*a*a*a*a*a*a*b` is a valid entry, and against a 60-character name of `a`s
 * (a file the model writes, a patch's file at publish) V8 backtracked for 67 s at 8 stars, hours at
 * more: a synchronous match holds the event loop, so every run, delivery and page of the process
 * stopped with it. Their `.` also stopped at a newline: `migrations/x<LF>y.sql` was not under
 * `migrations` and was pushed.
 */

const SOURCE = fileURLToPath(new URL('../../../src/config/path-patterns.ts', import.meta.url));

const matchInWorker = (file: string, patterns: string[], ms: number) =>
  callInWorker(SOURCE, 'matchingPattern', [file, patterns], ms);

it('a pattern of many `*` against a long name is answered at once, not after hours of backtracking', async () => {
  const stars = `${'a*'.repeat(16)}b`;
  const name = 'a'.repeat(200);
  // Was: no answer (the worker was still matching when stopped).
  await expect(matchInWorker(name, [stars], 10_000)).resolves.toBeNull();
  await expect(matchInWorker(`${name}b`, [stars], 10_000)).resolves.toBe(stars);
  await expect(matchInWorker(`x/${name}/y`, [`**/${stars}`, `**/${'?'.repeat(200)}`], 10_000)).resolves.toBe(
    `**/${'?'.repeat(200)}`,
  );
});

it('a newline in a name does not take it out from under a pattern', () => {
  expect(matchingPattern('migrations/x\ny.sql', ['migrations'])).toBe('migrations'); // was: undefined
  expect(matchingPattern('a\nb/secrets.txt', ['**/secrets.txt'])).toBe('**/secrets.txt'); // was: undefined
  expect(matchingPattern('a/x\n/b', ['a/**/b'])).toBe('a/**/b'); // was: undefined
  expect(matchingPattern('x\ny', ['x?y'])).toBe('x?y');
});

it('`*` and `?` stay within a segment, and `*` is a wildcard also where the name has one', () => {
  expect(matchingPattern('a/b/c.sql', ['a/*.sql'])).toBeUndefined();
  expect(matchingPattern('a/*.sql', ['a/*.sql'])).toBe('a/*.sql');
  expect(matchingPattern('a/**x', ['a/*x'])).toBe('a/*x');
  expect(matchingPattern('ab/c', ['a?c'])).toBeUndefined();
  expect(matchingPattern('abcbd', ['a*b*d'])).toBe('a*b*d');
  expect(matchingPattern('abcbde', ['a*b*d'])).toBeUndefined();
  expect(matchingPattern('a', ['a/*'])).toBeUndefined();
  expect(matchingPattern('x/y/z', ['**/z', 'x/**'])).toBe('**/z');
});

it('globMatches: `**` with its `/` is any number of directories, alone any characters', () => {
  expect(globMatches('src/**/*.ts', 'src/a.ts')).toBe(true);
  expect(globMatches('src/**/*.ts', 'src/a/b/c.ts')).toBe(true);
  expect(globMatches('src/**/*.ts', 'srcx/a.ts')).toBe(false);
  expect(globMatches('**.py', 'a/b.py')).toBe(true);
  expect(globMatches('a/*', 'a/b/c')).toBe(false);
  expect(globMatches('a/?', 'a//')).toBe(false);
  expect(globMatches('', '')).toBe(true);
  expect(globMatches('*', '')).toBe(true);
});
