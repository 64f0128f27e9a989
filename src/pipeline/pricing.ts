import type { Config } from '../config/config.js';
import type { ModelPrice } from '../config/prices.js';
import { ModelConfigError, resolveModel } from '../config/providers.js';
import type { ModelSpec } from './types.js';

/** What a run's model costs, known before any client is made (the job refuses a run it cannot measure). */

/**
 * The name a run's requests ask for and its price (by that name: a service may answer with a dated
 * variant of it). A person at the prompt costs nothing; a misconfigured model has neither (its
 * model setup fails with the reason).
 */
export function modelPrice(
  spec: ModelSpec,
  model: Config['model'],
): { name: string | null; price: ModelPrice | null } {
  let name: string;
  switch (spec.kind) {
    case 'human':
      return { name: null, price: { input: 0, cached_input: 0, output: 0 } };
    case 'url':
      name = spec.name;
      break;
    case 'openai':
      try {
        name = resolveModel(model).name;
      } catch (err) {
        if (err instanceof ModelConfigError) return { name: null, price: null };
        throw err;
      }
  }
  return { name, price: Object.hasOwn(model.prices, name) ? model.prices[name]! : null };
}

/**
 * Why a run with a cost limit cannot start: its model has no price, so what it spends could not be
 * measured. Null when it can (no limit, a price, or a model setup that fails on its own).
 */
export function costRefusal(spec: ModelSpec, model: Config['model'], costUsd: number | null): string | null {
  if (costUsd === null) return null;
  const { name, price } = modelPrice(spec, model);
  if (price || name === null) return null;
  return `The run may spend at most ${costUsd} USD, and model \`${name}\` has no price to count it by: the operator can add one with AGENTICFIX_MODEL_PRICES.`;
}
