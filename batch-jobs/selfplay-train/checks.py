"""Field checks shared by the trainer's config dataclasses: errors name the field and the value."""
from __future__ import annotations

from typing import Any

import numpy as np


def positive_int(name: str, value: Any, error: type[Exception] = ValueError) -> int:
    """`value` as an int >= 1; booleans are refused although Python counts them as ints."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise error(f"{name}: must be a positive integer (got {value!r})")
    return int(value)
