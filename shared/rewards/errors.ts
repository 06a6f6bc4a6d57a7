/**
 * The reward search's named errors: what its Lambdas and jobs throw, and what its state machine
 * and tests match on by name (Step Functions' ErrorEquals and the fan-out's recorded `error` are
 * `error.name`). One place per pipeline; test/unit/error-names.test.ts checks that every name a
 * state machine matches is one of these classes, or one of the platform's in shared/errors.ts.
 */
import { PipelineError, describeValue } from '../errors.ts';

/** A policy document that is not exactly the data-only format; `field` names where. */
export class PolicyFormatError extends PipelineError {
  /** `got`, when given, is the value received (shown shortened); omit it where it says nothing. */
  constructor(
    readonly field: string,
    readonly reason: string,
    ...got: [unknown?]
  ) {
    super(`policy ${field}: ${reason}${got.length > 0 ? ` (got ${describeValue(got[0])})` : ''}`);
  }
}

export class ProposalError extends PipelineError {}

/** No API key: the CLI says so and offers reward files instead. */
export class MissingApiKeyError extends PipelineError {}
