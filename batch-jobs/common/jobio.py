"""The job contract every Batch job follows, shared by all job images.

A job reads its spec (JSON) from the S3 URI in JOB_SPEC_URI, writes its outputs and a
result.json under OUTPUT_URI, reports progress to stdout as JSON lines, and exits non-zero
on failure with the error in result.json. The same code runs in the container on AWS and
as a child process of the embedded runtime; S3 endpoints come from the standard variables.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse


def split_s3_uri(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"expected s3://bucket/key, got {uri!r}")
    return parsed.netloc, parsed.path.lstrip("/")


class MissingObject(ValueError):
    """An s3:// URI a spec names has no object."""


def get_bytes(client: Any, uri: str, field: str, missing: type[Exception] = MissingObject) -> bytes:
    """The object's bytes; a missing key raises `missing` naming the field and the URI."""
    bucket, key = split_s3_uri(uri)
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as error:  # noqa: BLE001 - a missing key gets a clear message; others re-raise
        code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404", "NotFound"):
            raise missing(f"{field}: {uri}: no such object") from error
        raise


def s3_client():
    import boto3
    from botocore.config import Config

    # boto3 before 1.28 does not read AWS_ENDPOINT_URL_S3 itself; pass it on (unset on AWS).
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return boto3.client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}))


@dataclass
class JobContext:
    """What a job's main function gets besides its spec."""

    output_uri: str
    client: Any

    def put_bytes(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        bucket, prefix = split_s3_uri(self.output_uri)
        key = f"{prefix}{name}"
        self.client.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        return {"Bucket": bucket, "Key": key, "uri": f"s3://{bucket}/{key}"}

    def put_json(self, name: str, value: Any) -> dict:
        return self.put_bytes(name, json.dumps(value, indent=2).encode(), "application/json")

    def progress(self, **fields: Any) -> None:
        print(json.dumps({"progress": fields, "time": time.time()}), flush=True)


def run(main: Callable[[dict, JobContext], dict]) -> None:
    """Run a job's main function under the contract. Never returns."""
    spec_uri = os.environ.get("JOB_SPEC_URI")
    output_uri = os.environ.get("OUTPUT_URI")
    if not spec_uri or not output_uri:
        print(json.dumps({"error": "JOB_SPEC_URI and OUTPUT_URI must be set"}), file=sys.stderr)
        sys.exit(2)
    if not output_uri.endswith("/"):
        output_uri += "/"
    client = s3_client()
    ctx = JobContext(output_uri=output_uri, client=client)
    bucket, key = split_s3_uri(spec_uri)
    try:
        spec = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        result = main(spec, ctx)
    except Exception as error:  # noqa: BLE001 - the contract records any failure
        traceback.print_exc()
        ctx.put_json("result.json", {"error": {"type": type(error).__name__, "message": str(error)}})
        sys.exit(1)
    if result is not None:
        ctx.put_json("result.json", result)
    sys.exit(0)
