/**
 * The probe's named errors: what its Lambdas and jobs throw, and what its state machine
 * and tests match on by name (Step Functions' ErrorEquals and the fan-out's recorded `error` are
 * `error.name`). One place per pipeline; test/unit/error-names.test.ts checks that every name a
 * state machine matches is one of these classes, or one of the platform's in shared/errors.ts.
 */
import { PipelineError } from '../errors.ts';

/** A negative item: the probe squares non-negative numbers, so its fan-out records this one as failed. */
export class NegativeItem extends PipelineError {}
