"""Reading a stage's spec: every malformed field raises SpecError naming it (a SpecError is a
mistake in the request, so the state machine does not retry it)."""
from __future__ import annotations

import math
from typing import Any


class SpecError(ValueError):
    """A spec field is missing or malformed."""


def field(spec: dict, name: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    """spec[name], which must be of `kind` (a bool is not an int); `where` prefixes the name."""
    value = spec.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = "/".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise SpecError(f"{where}{name}: expected {names} (got {value!r})")
    return value


def number(spec: dict, name: str, default: float | None, low: float, high: float, where: str = "") -> float:
    """A finite number in [low, high]; absent, the default (None: required)."""
    if name not in spec and default is not None:
        return default
    value = float(field(spec, name, (int, float), where))
    if not math.isfinite(value) or not low <= value <= high:
        raise SpecError(f"{where}{name}: must be between {low:g} and {high:g} (got {spec[name]!r})")
    return value


def integer(spec: dict, name: str, default: int | None, low: int, high: int, where: str = "") -> int:
    """An integer in [low, high]; absent, the default (None: required)."""
    if name not in spec and default is not None:
        return default
    value = field(spec, name, int, where)
    if not low <= value <= high:
        raise SpecError(f"{where}{name}: must be between {low} and {high} (got {value!r})")
    return value


def span(spec: dict, name: str, default: tuple[float, float], low: float, high: float, where: str = "") -> tuple[float, float]:
    """A [min, max] pair of numbers within [low, high], min <= max."""
    if name not in spec:
        return default
    value = spec[name]
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        raise SpecError(f"{where}{name}: expected [min, max], two numbers (got {value!r})")
    first, second = float(value[0]), float(value[1])
    if not low <= first <= second <= high:
        raise SpecError(f"{where}{name}: expected {low:g} <= min <= max <= {high:g} (got {value!r})")
    return first, second


def choice(spec: dict, name: str, default: str, allowed: tuple[str, ...], where: str = "") -> str:
    if name not in spec:
        return default
    value = spec[name]
    if value not in allowed:
        raise SpecError(f"{where}{name}: must be one of {', '.join(allowed)} (got {value!r})")
    return value


def only(spec: dict, allowed: set[str], where: str = "") -> None:
    """Rejects fields the stage does not know (a misspelt setting would otherwise be ignored)."""
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SpecError(f"{where}{unknown[0]}: unknown field (known: {', '.join(sorted(allowed))})")
