import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { onEmulatorClose } from '../../src/emulator/github.js';

/**
 * Every GitHub emulator a test starts (the tests' own, the demo's) is checked as it closes: each request
 * the app sent, REST and GraphQL, must be an operation of GitHub's published description with its
 * documented parameters and body, and each answer the emulator gave must be one the operation documents
 * (issue 26). With AGENTICFIX_CONTRACT_SUMMARY naming a file (`npm run contract`), each emulator's figures
 * are appended to it as a JSON line.
 *
 * A violation fails the test, or the `afterAll`, that closed the emulator: it is reported by this file's
 * `afterEach`/`afterAll` rather than thrown from `close()`, which would skip the closing hook's later
 * clean-up (a server left listening keeps Jest from exiting). Only a close in the suite's own top-level
 * `afterAll`, which runs after this file's, throws.
 */
let pending: string[] = [];
let late = false;

onEmulatorClose(async (requests) => {
  // Loaded on first close: the descriptions are large, and most suites start no emulator.
  const { checkRecorded } = await import('./github-description.js');
  const found = checkRecorded(requests);
  const record = process.env.AGENTICFIX_CONTRACT_SUMMARY;
  if (record)
    appendFileSync(
      record,
      `${JSON.stringify({
        suite: path.basename(expect.getState().testPath ?? ''),
        operations: found.operations,
        requests_checked: found.requests,
        responses_checked: found.responses,
        violations: found.problems.length,
      })}\n`,
    );
  if (found.problems.length === 0) return;
  const message = `the GitHub emulator saw ${found.problems.length} request(s) or answer(s) GitHub's description does not allow:\n${found.problems.join('\n')}`;
  if (late) throw new Error(message);
  pending.push(message);
});

function report(): void {
  const found = pending;
  pending = [];
  if (found.length > 0) throw new Error(found.join('\n'));
}
afterEach(report);
afterAll(() => {
  late = true;
  report();
});
