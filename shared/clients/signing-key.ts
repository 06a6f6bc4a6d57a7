/** The approval-link signing key from Secrets Manager, read once per container. */
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { memoizeAsync, signingKeyFromSecret } from '../approval.ts';
import { secretsClient } from './aws.ts';

export function signingKeyLoader(secretArn: string): () => Promise<string> {
  return memoizeAsync(async () => signingKeyFromSecret((await secretsClient().send(new GetSecretValueCommand({ SecretId: secretArn }))).SecretString));
}
