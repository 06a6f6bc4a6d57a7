/** Reward search, step 1 of a generation: the candidates (Claude, or reward files) and their training items. */
import { ENV, optionalEnv } from '#shared/env.ts';
import { proposeStep } from '#shared/rewards/steps.ts';

const anthropicSecretArn = optionalEnv(ENV.anthropicSecretArn);

export async function handler(event: unknown) {
  return proposeStep(event, { anthropicSecretArn });
}
