/** Reads a required environment variable once, with an error that says which one is missing. */
export function requireEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') {
    throw new Error(`environment variable ${name} is not set; the construct that creates this function sets it`);
  }
  return value;
}

export function optionalEnv(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** Environment variable names the constructs set on functions and jobs. */
export const ENV = {
  table: 'TABLE_NAME',
  bucket: 'BUCKET_NAME',
  signingSecretArn: 'SIGNING_SECRET_ARN',
  anthropicSecretArn: 'ANTHROPIC_SECRET_ARN',
  senderEmail: 'SENDER_EMAIL',
  approvalBaseUrl: 'APPROVAL_BASE_URL',
  stateMachineArn: 'STATE_MACHINE_ARN',
  pipeline: 'PIPELINE_NAME',
  /** The run-cost function's: JSON {logical id: instance type} of its stack's GPU job definitions. */
  jobInstanceTypes: 'JOB_INSTANCE_TYPES',
} as const;
