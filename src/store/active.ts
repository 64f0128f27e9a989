import type { RunState } from './store.js';

/** A run not over yet: an issue has at most one (the queue supersedes the older). */
export const ACTIVE_STATES = ['queued', 'running'] as const satisfies readonly RunState[];
export const isActive = (state: RunState): boolean => (ACTIVE_STATES as readonly RunState[]).includes(state);
/** ACTIVE_STATES as an SQL list, for the stores' queries. */
export const ACTIVE_SQL = `(${ACTIVE_STATES.map((s) => `'${s}'`).join(', ')})`;
