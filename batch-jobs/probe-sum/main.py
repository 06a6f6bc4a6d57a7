"""probe-sum: the platform's probe job. Sums the values it is given and writes a summary.

It exercises the Batch job contract end to end (spec in, outputs and result.json out, progress
lines, a non-zero exit on failure) so a deployment can be verified without a GPU.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from jobio import JobContext, run
from summing import summarize


@dataclass
class ProbeSumConfig:
    values: list[float]
    """The numbers to sum."""
    fault: str = "none"
    """For fault drills: "exit" exits 3; "no-result" exits 0 without writing result.json."""
    labels: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.fault not in ("none", "exit", "no-result"):
            raise ValueError(f"fault: must be none, exit or no-result (got {self.fault!r})")
        if not all(isinstance(v, (int, float)) for v in self.values):
            raise ValueError(f"values: must be numbers (got {self.values!r})")


def main(spec: dict, ctx: JobContext) -> dict | None:
    config = ProbeSumConfig(**spec)
    ctx.progress(stage="start", values=len(config.values))
    if config.fault == "exit":
        print("probe-sum: fault drill, exiting 3", file=sys.stderr)
        sys.exit(3)
    if config.fault == "no-result":
        return None
    summary = summarize(config.values)
    written = ctx.put_json("summary.json", summary)
    ctx.progress(stage="done", total=summary["total"])
    return {
        "total": summary["total"],
        "count": summary["count"],
        "files": [{"uri": written["uri"], "name": "summary.json"}],
        "metrics": {"total": summary["total"], "count": summary["count"]},
        "s3Outputs": [{"Bucket": written["Bucket"], "Key": written["Key"]}],
    }


if __name__ == "__main__":
    run(main)
