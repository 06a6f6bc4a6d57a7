/** Reward search, step 1 of a generation: the candidates (Claude, or reward files) and their training items. */
import { optionalEnv } from '#shared/env.ts';
import { proposeStep } from '#shared/rewards/steps.ts';
import { ENV } from '#shared/table.ts';

const anthropicSecretArn = optionalEnv(ENV.anthropicSecretArn);

export async function handler(event: unknown) {
  return proposeStep(event, { anthropicSecretArn });
}
