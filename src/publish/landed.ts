import { markerText, readMarker, type Marker } from '../trace/marker.js';

/**
 * Writes that may have landed: a POST that timed out, lost its connection or got a 5xx may still have
 * been made, now or later (a request held on the way lands when it is let through). Before such a POST
 * is sent again the app looks for its marker among the app's own writes there and reuses what it finds;
 * once the write is settled, copies that landed late are deleted, so a place holds each write once.
 */

/** The slice of Octokit used here (the hook's client, before its type is known). */
export interface Requester {
  request(route: string, params?: Record<string, unknown>): Promise<{ data: unknown; headers: object }>;
}

/** Where a POST's writes are listed and how one is deleted; null for writes not looked up. */
export interface Place {
  list: string;
  remove(id: number): string;
}

/** Issue and pull request comments, and replies in a review thread (pull requests: one per branch, GitHub's 422). */
export function placeOf(pathname: string): Place | null {
  const comment = /\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(pathname);
  if (comment) {
    const [, o, r, n] = comment;
    return {
      list: `/repos/${o}/${r}/issues/${n}/comments`,
      remove: (id) => `/repos/${o}/${r}/issues/comments/${id}`,
    };
  }
  const reply = /\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)\/comments\/\d+\/replies$/.exec(pathname);
  if (reply) {
    const [, o, r, n] = reply;
    return {
      list: `/repos/${o}/${r}/pulls/${n}/comments`,
      remove: (id) => `/repos/${o}/${r}/pulls/comments/${id}`,
    };
  }
  return null;
}

interface Written {
  id: number;
  body?: string | null;
  user?: { login: string; type: string } | null;
}

/** The app's bot account per GitHub (its slug, from GET /app, which the client signs as the app). */
const bots = new Map<string, Promise<string>>();
function botLogin(gh: Requester, host: string): Promise<string> {
  let bot = bots.get(host);
  if (!bot) {
    bot = gh.request('GET /app').then(({ data }) => `${(data as { slug: string }).slug}[bot]`);
    bots.set(host, bot);
    bot.catch(() => bots.delete(host)); // asked again next time
  }
  return bot;
}

/** Pages read at most when looking (100 writes each): a place with more is past what a run writes into. */
const MAX_PAGES = 10;

/**
 * The writes at `place` that carry `mark` and were made by the app, oldest first. A marker in anyone
 * else's comment is ignored: an issue's author can type one.
 */
export async function marked(
  gh: Requester,
  host: string,
  place: Place,
  mark: Marker,
  since?: Date,
): Promise<Written[]> {
  const bot = await botLogin(gh, host);
  const text = markerText(mark);
  const same = (body: string | null | undefined) => {
    const m = readMarker(body);
    return m !== null && markerText(m) === text;
  };
  const found: Written[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const { data } = await gh.request(`GET ${place.list}`, {
      per_page: 100,
      page,
      ...(since ? { since: since.toISOString() } : {}),
    });
    const list = data as Written[];
    for (const w of list) if (w.user?.login === bot && w.user.type === 'Bot' && same(w.body)) found.push(w);
    if (list.length < 100) break;
  }
  return found;
}

/**
 * Deletes the app's copies of the write other than `keep`. GitHub no longer having one (404) is what
 * was wanted.
 */
export async function dropCopies(
  gh: Requester,
  host: string,
  place: Place,
  mark: Marker,
  keep: number,
  since?: Date,
): Promise<number> {
  let dropped = 0;
  for (const w of await marked(gh, host, place, mark, since)) {
    if (w.id === keep) continue;
    await gh.request(`DELETE ${place.remove(w.id)}`).catch((e: { status?: number }) => {
      if (e.status !== 404) throw e;
    });
    dropped++;
  }
  return dropped;
}

/**
 * How long after it was sent a POST is still waited for, in client timeouts: the case was a
 * request held for two (60 s against 30 s) that then landed.
 */
export const LATE_LANDING_TIMEOUTS = 3;
