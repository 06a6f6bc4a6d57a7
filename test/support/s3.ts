/**
 * One s3rver with a bucket for a unit test file, the process pointed at it (region, keys and
 * endpoint in the environment, the SDK clients reset), and everything put back by `close`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { resetClients } from '#shared/clients/aws.ts';
import { startS3rver } from '#infra/local/emulators.ts';
import { LOCAL_KEY, LOCAL_REGION } from '#infra/local/resolve.ts';

export interface TestS3 {
  readonly s3: S3Client;
  readonly url: string;
  /** The variables set (also for child processes that should reach the emulator). */
  readonly env: Readonly<Record<string, string>>;
  /** A scratch folder beside the emulator's, removed by close. */
  readonly work: string;
  close(): Promise<void>;
}

export async function startTestS3(bucket: string, prefix = 'fp-s3-'): Promise<TestS3> {
  const work = mkdtempSync(join(tmpdir(), prefix));
  const emulator = await startS3rver(join(work, 's3'), 0);
  const s3 = new S3Client({
    forcePathStyle: true,
    endpoint: emulator.url,
    region: LOCAL_REGION,
    credentials: { accessKeyId: LOCAL_KEY, secretAccessKey: LOCAL_KEY },
  });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const env = { AWS_REGION: LOCAL_REGION, AWS_ACCESS_KEY_ID: LOCAL_KEY, AWS_SECRET_ACCESS_KEY: LOCAL_KEY, AWS_ENDPOINT_URL_S3: emulator.url };
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  resetClients();
  return {
    s3,
    url: emulator.url,
    env,
    work,
    async close() {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      resetClients();
      await emulator.close();
      s3.destroy();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
