import { ConfigError } from '#shared/errors.ts';
import { RUN_STEP } from '#shared/table.ts';

/** Step Functions state names are at most 80 characters; Map iterators share one namespace locally. */
export function stateName(stepId: string, part: string): string {
  const name = part ? `${stepId}: ${part}` : stepId;
  if (name.length > 80) throw new ConfigError('stepId', stepId, `state name "${name}" exceeds 80 characters`);
  return name;
}

const STEP_ID = /^[A-Za-z][A-Za-z0-9-]{0,47}$/;

export function checkStepId(stepId: string): string {
  if (!STEP_ID.test(stepId)) {
    throw new ConfigError('stepId', stepId, 'must start with a letter and use letters, digits and "-" (at most 48)');
  }
  if (stepId === RUN_STEP) throw new ConfigError('stepId', stepId, "is the run cache's (its states and entries): name the step otherwise");
  return stepId;
}
