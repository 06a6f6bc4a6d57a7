/**
 * Molecular discovery's named errors: what its Lambdas and jobs throw, and what its state machine
 * and tests match on by name (Step Functions' ErrorEquals and the fan-out's recorded `error` are
 * `error.name`). One place per pipeline; test/unit/error-names.test.ts checks that every name a
 * state machine matches is one of these classes, or one of the platform's in shared/errors.ts.
 */
import { PipelineError } from '../errors.ts';

/** An oracle job failed as a whole (xtb missing, the job crashed): the round cannot be recorded. */
export class OracleJobFailed extends PipelineError {}

/** A campaign document or step input that breaks the campaign's rules (a bad round, a stale document). */
export class CampaignError extends PipelineError {}

/** A pool file that yields nothing usable: binary content, or not one valid molecule. */
export class PoolFileError extends PipelineError {
  constructor(
    readonly source: string,
    readonly reason: string,
  ) {
    super(`pool file ${source}: ${reason}`);
  }
}

/** A SMILES that RDKit cannot parse, given where a valid molecule is required. */
export class InvalidSmilesError extends PipelineError {
  constructor(
    readonly smiles: string,
    readonly reason: string,
  ) {
    super(`invalid SMILES ${JSON.stringify(smiles)}: ${reason}`);
  }
}

/** The matrix could not be factored even with the largest jitter allowed. */
export class CholeskyError extends PipelineError {}

/** xtb is not installed (or not on PATH): no molecule can be measured. */
export class XtbMissingError extends PipelineError {
  constructor(command: string) {
    super(`${command}: not found; install Debian's xtb package (apt-get install xtb)`);
  }
}
