import { z } from 'zod';

/** The kinds of setting the environment schema (env.ts, env-service.ts) is made of. */
export const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
export const bool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

export const MiB = 1024 * 1024;
