import { safeNext } from '../../../src/web/routes.js';
import { MAX_PENDING_SIGN_INS, Sessions } from '../../../src/web/sessions.js';

/**
 * Red team (after issue 35): GET /login needs no session, and each one kept its OAuth `state` with the
 * `next` it was given (up to the 16 KB a request line may hold) for ten minutes, with no cap. 20,000 of
 * them with a 15 KB `next` took serve's heap from 58 to 363 MB (measured over HTTP); a visitor who keeps
 * that up for the ten minutes takes serve down. Sign-ins under way are now capped (the oldest is
 * forgotten first), and so is the length of a `next` kept.
 */

describe('sign-ins under way hold bounded memory, whoever starts them', () => {
  const LONG = `/runs?x=${'a'.repeat(15_000)}`;

  it('a `next` longer than a real run address is not kept: the sign-in goes to the run list', () => {
    expect(safeNext(LONG)).toBe('/runs');
    const fine = `/runs?repo=${'o'.repeat(39)}%2F${'r'.repeat(100)}&state=failed&page=3`;
    expect(safeNext(fine)).toBe(fine);
  });

  it('past the cap, the oldest sign-ins under way are forgotten; the newest still finish', () => {
    const sessions = new Sessions();
    const first = sessions.start(safeNext(LONG));
    const second = sessions.start('/runs/r-2');
    for (let i = 0; i < MAX_PENDING_SIGN_INS; i++) sessions.start(safeNext(LONG));
    const last = sessions.start('/runs/r-last');
    expect(sessions.finish(first)).toBeNull(); // was the 15 KB `next`, kept
    expect(sessions.finish(second)).toBeNull();
    expect(sessions.finish(last)).toBe('/runs/r-last');
    expect(sessions.finish(last)).toBeNull(); // once only, as before
  });
});
