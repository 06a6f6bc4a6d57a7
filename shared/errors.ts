/**
 * Named errors. Step Functions matches `ErrorEquals` against `error.name`, so each
 * name here is part of a pipeline's API: change one and the Retry/Catch rules that
 * mention it stop matching.
 */

/** Base class: sets `name` from the subclass so Step Functions can match it. */
export class PipelineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A config or event failed its schema. Names the field and the value received. */
export class ConfigError extends PipelineError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`${field}: ${reason} (got ${describeValue(value)})`);
  }
}

/** A pipeline name that no stack registers. */
export class UnknownPipelineError extends PipelineError {
  constructor(
    readonly pipeline: string,
    readonly known: readonly string[],
  ) {
    super(`unknown pipeline "${pipeline}"; known pipelines: ${known.join(', ') || '(none)'}`);
  }
}

/** A thing that should exist does not (an artifact version, an approval, a deployed stack). */
export class NotFoundError extends PipelineError {}

/** A deployed stack or state machine that the CLI was asked to use is not there. */
export class MissingDeploymentError extends PipelineError {}

/** An approval was rejected by a person. The approval gate fails its task with this name. */
export class ApprovalRejected extends PipelineError {}

/** A local emulator could not start: a port in use, a data directory held by another process. */
export class EmulatorStartError extends PipelineError {}

/** The ASL uses something the local engine would silently ignore or run differently. */
export class UnsupportedLocally extends PipelineError {}

/** An artifact version was about to be overwritten. Versions are immutable. */
export class ArtifactVersionExists extends PipelineError {}

/**
 * An S3 object a step was told to read is not there. Named as S3 names the error, so that the
 * callers and Catch rules that match S3's NoSuchKey still match; the message names the field and
 * the URI, where S3's own says only "The specified key does not exist."
 */
export class NoSuchKey extends PipelineError {
  constructor(
    readonly field: string,
    readonly uri: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: ${uri} does not exist`, options);
  }
}

/** The bucket of an S3 URI a step was told to read is not there; named as S3 names the error. */
export class NoSuchBucket extends PipelineError {
  constructor(
    readonly field: string,
    readonly uri: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: the bucket of ${uri} does not exist`, options);
  }
}

/** Short, safe rendering of a received value for error messages. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  let text: string;
  try {
    text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/** The name of a thrown error ('' for a thrown non-Error), for matching SDK error names. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : '';
}
