/**
 * The refinery's ingest job (Batch, CPU queue): reads a corpus, samples it, mixes in labelled
 * test material and writes content-addressed shards with the Distributed Map's item list
 * (ingest.ts has the spec and the steps; shared/job.ts the contract).
 *
 * In the image: `node main.mjs`, the bundle build.ts makes, with Debian's documentation packages
 * and groff installed for the `debian:` corpus. Locally: `node --import tsx main.ts` in this folder.
 */
import { readObjectBytes } from '#shared/clients/aws.ts';
import { writeFile } from '#shared/documents.ts';
import { runJobMain } from '#shared/job.ts';
import { parseS3Uri } from '#shared/s3uri.ts';
import { ingestCorpus, parseIngestSpec } from './ingest.ts';

await runJobMain(async (spec, ctx) =>
  ingestCorpus(parseIngestSpec(spec), ctx, {
    readObject: (uri, field) => readObjectBytes(uri, field),
    writeObject: async (uri, bytes, contentType) => {
      const { Bucket, Key } = parseS3Uri(uri, 'spec.shardPrefix');
      await writeFile(Bucket, Key, bytes, contentType);
    },
  }),
);
