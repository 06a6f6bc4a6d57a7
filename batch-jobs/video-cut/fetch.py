"""Reading a source video into a local file with a byte cap: from S3 or over HTTP(S).

A source that cannot be a usable video for a reason that will not change on a retry (no such
object, HTTP 404, more bytes than allowed, an empty file) raises Unusable with the reason; the
stage records it and the pipeline goes on with the other sources. Anything else (S3 throttling,
a 5xx, a reset connection, a timeout) propagates, so the state machine retries the step.
"""
from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from typing import Any, BinaryIO

from jobio import split_s3_uri

CHUNK = 1 << 20
HTTP_TIMEOUT_SECONDS = 60
# 4xx answers a retry will not change (408 timeout and 429 throttling are retried).
RETRYABLE_HTTP = {408, 425, 429}


class Unusable(ValueError):
    """A source that is not usable, for a reason a retry will not change."""


def copy_capped(body: BinaryIO, out: BinaryIO, max_bytes: int) -> tuple[int, str]:
    """Copies body to out, at most max_bytes; returns (bytes, sha256). More raises Unusable."""
    digest = hashlib.sha256()
    total = 0
    while True:
        chunk = body.read(CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise Unusable(f"larger than maxBytes ({max_bytes} bytes)")
        digest.update(chunk)
        out.write(chunk)
    if total == 0:
        raise Unusable("the file is empty (0 bytes)")
    return total, digest.hexdigest()


def download(client: Any, uri: str, out: BinaryIO, max_bytes: int) -> tuple[int, str]:
    """The source at uri (s3://, https:// or http://) copied to out; returns (bytes, sha256)."""
    if uri.startswith("s3://"):
        bucket, key = split_s3_uri(uri)
        try:
            response = client.get_object(Bucket=bucket, Key=key)
        except Exception as error:  # noqa: BLE001 - only a missing key is the source's fault
            code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise Unusable(f"{uri}: no such object") from error
            raise
        length = response.get("ContentLength")
        if isinstance(length, int) and length > max_bytes:
            raise Unusable(f"larger than maxBytes ({length} > {max_bytes} bytes)")
        return copy_capped(response["Body"], out, max_bytes)
    request = urllib.request.Request(uri, headers={"User-Agent": "frontier-pipelines video-cut"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:  # noqa: S310 - scheme checked by the caller
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise Unusable(f"larger than maxBytes ({length} > {max_bytes} bytes)")
            return copy_capped(response, out, max_bytes)
    except urllib.error.HTTPError as error:
        if 400 <= error.code < 500 and error.code not in RETRYABLE_HTTP:
            raise Unusable(f"HTTP {error.code} {error.reason}") from error
        raise
