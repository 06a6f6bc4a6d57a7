/**
 * Opens what a local runtime left under its data directory, without synthesizing the app, for
 * the CLI's read commands (artifacts, approvals): through the runtime that holds the directory
 * while one runs (its loopback endpoints, with the credentials it published for this user), or
 * dynalite on the same files when none does.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resetClients } from '#shared/clients/aws.ts';
import { NotFoundError } from '#shared/errors.ts';
import { type LiveRuntime, liveRuntime, lockDataDir, startDynalite } from './emulators.ts';
import { LOCAL_KEY, LOCAL_REGION } from './resolve.ts';
import type { LocalResources } from './runtime.ts';

export interface LocalData {
  readonly table: string;
  readonly bucket: string;
  close(): Promise<void>;
}

export async function openLocalData(dataDir: string): Promise<LocalData> {
  const file = join(dataDir, 'resources.json');
  if (!existsSync(file)) {
    throw new NotFoundError(`${dataDir} holds no local data yet; run a pipeline first (npm start)`);
  }
  const resources = JSON.parse(readFileSync(file, 'utf8')) as LocalResources;
  const live = liveRuntime(dataDir);
  if (live) {
    connectToLiveRuntime(live);
    return { table: resources.tables[0]!, bucket: resources.buckets[0]!, close: async () => {} };
  }
  const unlock = lockDataDir(dataDir);
  try {
    const dynamo = await startDynalite(join(dataDir, 'dynamodb'), 0);
    Object.assign(process.env, {
      AWS_ENDPOINT_URL_DYNAMODB: dynamo.url,
      AWS_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: LOCAL_KEY,
      AWS_SECRET_ACCESS_KEY: LOCAL_KEY,
    });
    resetClients();
    return {
      table: resources.tables[0]!,
      bucket: resources.buckets[0]!,
      close: async () => {
        await dynamo.close();
        unlock();
      },
    };
  } catch (error) {
    unlock();
    throw error;
  }
}

/** Points this process's AWS clients (the shared ones, and any built after) at a running runtime's loopback services. */
export function connectToLiveRuntime(live: LiveRuntime): void {
  Object.assign(process.env, {
    ...live.endpoints,
    AWS_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: live.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: live.credentials.secretAccessKey,
  });
  resetClients();
}
