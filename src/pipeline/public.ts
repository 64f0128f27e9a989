import { homedir } from 'node:os';
import path from 'node:path';
import type { Config } from '../config/config.js';
import { resolveModel } from '../config/providers.js';
import { Scrubber } from '../trace/redact.js';
import type { ModelSpec } from './types.js';

/**
 * What the app posts on GitHub is public to everyone who can read the repository: the operator's host
 * paths (worktrees, mirrors, run directories, homes) and the model endpoint are replaced by placeholders
 * in every body it sends (trace, evidence, errors), wherever they come from.
 */
export function publicScrubber(config: Config, model?: ModelSpec): Scrubber {
  const endpoint = model?.kind === 'url' ? model.baseUrl : modelUrl(config);
  const url = parseUrl(endpoint);
  // A one-segment directory (`/data`, `/root`, `/app`) names nothing of the host and is common in
  // Dockerfiles and test output, so only deeper ones are replaced; the app's own directories always are.
  const deep = (dir: string) => (dir.split('/').filter(Boolean).length >= 2 ? dir : null);
  return new Scrubber([
    [config.worktreeDir, '<worktrees>'],
    [config.cacheDir, '<mirrors>'],
    [config.runsDir, '<runs>'],
    [deep(path.dirname(config.dbPath)), '<agenticfix home>'],
    [config.sandbox.hostHome?.local, '<agenticfix home>'],
    [config.sandbox.hostHome?.host, '<agenticfix home>'],
    [deep(process.cwd()), '<app directory>'],
    [deep(homedir()), '<home>'],
    [endpoint, '<model endpoint>'],
    [url?.origin, '<model endpoint>'],
    // `connect ECONNREFUSED 10.0.0.5:8000`, `getaddrinfo ENOTFOUND llm.internal`: a bare `localhost` stays.
    [
      url && (url.port || !/^(localhost|127\.0\.0\.1|\[::1\])$/.test(url.hostname)) ? url.host : null,
      '<model endpoint>',
    ],
  ]);
}

function parseUrl(s: string | undefined): URL | null {
  try {
    return s ? new URL(s) : null;
  } catch {
    return null;
  }
}

function modelUrl(config: Config): string | undefined {
  try {
    return resolveModel(config.model).baseUrl;
  } catch {
    return config.model.baseUrl; // incomplete settings: runs fail with model_error, and say so publicly
  }
}
