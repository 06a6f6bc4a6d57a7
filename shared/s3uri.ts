import { ConfigError } from './errors.ts';

export interface S3Location {
  readonly Bucket: string;
  readonly Key: string;
}

export function parseS3Uri(uri: string, field = 'uri'): S3Location {
  const match = /^s3:\/\/([^/]+)\/(.+)$/.exec(uri);
  if (!match) throw new ConfigError(field, uri, 'expected s3://bucket/key');
  return { Bucket: match[1]!, Key: match[2]! };
}

export function s3Uri(location: S3Location): string {
  return `s3://${location.Bucket}/${location.Key}`;
}
