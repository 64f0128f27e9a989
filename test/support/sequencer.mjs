// Which suite a jest worker takes next. Jest's own order stays where it knows the suites' times (from its
// cache, after one run in this folder): the slowest first, so no long suite starts last while the other
// worker idles. A fresh clone (CI) has no times and jest would order by file size, which put the
// 150 s benchmark suite, a small file, last: here suites without times go by project instead, the heaviest
// first (services, docker, cli, app, unit: the reverse of test/projects.mjs), then by file size.
import Sequencer from '@jest/test-sequencer';
import { PROJECTS } from '../projects.mjs';

const HEAVIEST_FIRST = Object.keys(PROJECTS).reverse();
const weight = (test) => HEAVIEST_FIRST.indexOf(test.context.config.displayName?.name ?? '');

export default class HeaviestFirst extends Sequencer.default {
  sort(tests) {
    const sorted = super.sort(tests);
    const failed = sorted.filter((t) => this.hasFailed(t)); // still first, as jest has them
    const rest = sorted.filter((t) => !this.hasFailed(t));
    // Array.prototype.sort is stable: within a project the file-size order jest chose stays.
    const untimed = rest.filter((t) => t.duration == null).sort((a, b) => weight(a) - weight(b));
    return [...failed, ...untimed, ...rest.filter((t) => t.duration != null)];
  }
}
