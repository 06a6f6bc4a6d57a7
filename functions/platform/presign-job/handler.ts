/** Presigned URLs for a sandboxed job's spec and outputs (shared/presign.ts). */
import { presignJob } from '#shared/presign.ts';

export async function handler(event: unknown) {
  return presignJob(event);
}
