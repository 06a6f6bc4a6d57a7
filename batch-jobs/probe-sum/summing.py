"""Pure part of probe-sum: no I/O, unit-tested."""
from __future__ import annotations

import math


def summarize(values: list[float]) -> dict:
    """Total, count and mean; math.fsum keeps the total exact for floats like 0.1 + 0.2."""
    total = math.fsum(values)
    count = len(values)
    return {"total": total, "count": count, "mean": total / count if count else None}
