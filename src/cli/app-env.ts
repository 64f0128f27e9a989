import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** Probot's usual variables; the private key comes inline (PRIVATE_KEY) or from a file (PRIVATE_KEY_PATH). */
const AppEnv = z
  .object({
    APP_ID: z.coerce.number().int().positive(),
    PRIVATE_KEY: z.string().min(1).optional(),
    PRIVATE_KEY_PATH: z.string().min(1).optional(),
    GHE_HOST: z.string().min(1).optional(),
    GHE_PROTOCOL: z.enum(['https', 'http']).default('https'),
  })
  .refine((e) => e.PRIVATE_KEY || e.PRIVATE_KEY_PATH, {
    message: 'set PRIVATE_KEY or PRIVATE_KEY_PATH',
    path: ['PRIVATE_KEY'],
  });

/** What serve and worker need to act as the GitHub App: both mint installation tokens themselves. */
export interface AppCredentials {
  appId: number;
  privateKey: string;
  /** GitHub Enterprise or the emulator; api.github.com when undefined. */
  baseUrl: string | undefined;
}

/** The app's credentials from the environment, or the problems as one line. */
export function appCredentials(raw: Record<string, string>): AppCredentials | string {
  const parsed = AppEnv.safeParse(raw);
  if (!parsed.success) return issuesLine(parsed.error);
  const env = parsed.data;
  return {
    appId: env.APP_ID,
    privateKey: env.PRIVATE_KEY?.replace(/\\n/g, '\n') ?? readFileSync(env.PRIVATE_KEY_PATH!, 'utf8'),
    baseUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3` : undefined,
  };
}

export const issuesLine = (error: z.ZodError) =>
  error.issues.map((i) => `${String(i.path[0])}: ${i.message}`).join('; ');

/** Resolves on the first SIGINT or SIGTERM. */
export function untilStopped(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
