import path from 'node:path';
import ignoreModule, { type Ignore } from 'ignore';
import { readRegularFile } from '../workspace/safe-read.js';

/** A .gitignore larger than this is not read (the repository is untrusted). */
const MAX_GITIGNORE_BYTES = 256 * 1024;

/**
 * What the repository's .gitignore files (at the root and in every directory) ignore, as git reads
 * them: coverage reports, build output and the like, which search_code and list_files skip unless asked.
 */
export class GitIgnores {
  private readonly rules = new Map<string, Ignore | null>();
  constructor(private readonly root: string) {}

  private rulesOf(dirRel: string): Ignore | null {
    const known = this.rules.get(dirRel);
    if (known !== undefined) return known;
    const read = readRegularFile(path.join(this.root, dirRel, '.gitignore'), MAX_GITIGNORE_BYTES);
    // A CommonJS module: its `default` is the factory itself.
    const ig = read.ok ? ignoreModule.default().add(read.buf.toString('utf8')) : null;
    this.rules.set(dirRel, ig);
    return ig;
  }

  /** Whether `rel` (relative to the root, `/`-separated) is ignored by a .gitignore above it. */
  ignored(rel: string, isDir: boolean): boolean {
    const parts = rel.split('/');
    for (let i = 0; i < parts.length; i++) {
      const ig = this.rulesOf(parts.slice(0, i).join('/'));
      if (ig?.ignores(parts.slice(i).join('/') + (isDir ? '/' : ''))) return true;
    }
    return false;
  }
}
