"""For the jobs' tests: put_object and get_object (the two calls the jobs make) over a dict, the
S3 edge of a job's contract without a network. A missing key raises what boto3 raises: an error
whose response names the code NoSuchKey."""
from __future__ import annotations

import io


class MemoryS3Error(Exception):
    def __init__(self, code: str):
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


class MemoryS3:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.order: list[str] = []

    def put_object(self, Bucket: str, Key: str, Body: bytes, ContentType: str | None = None) -> None:  # noqa: N803
        self.objects[(Bucket, Key)] = bytes(Body)
        self.order.append(Key)

    def get_object(self, Bucket: str, Key: str) -> dict:  # noqa: N803
        if (Bucket, Key) not in self.objects:
            raise MemoryS3Error("NoSuchKey")
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}
