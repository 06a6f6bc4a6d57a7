"""Reading job specs: each reader names the field path and the value it refused (SpecError)."""
from __future__ import annotations

from typing import Any

_MISSING = object()


class SpecError(ValueError):
    """A spec field is missing, of the wrong type, or out of range."""


def obj(parent: dict, key: str, path: str, default: Any = _MISSING) -> dict:
    value = parent.get(key, _MISSING) if isinstance(parent, dict) else _MISSING
    if value is _MISSING and default is not _MISSING:
        return default
    if not isinstance(value, dict):
        raise SpecError(f"{path}{key}: must be an object (got {_show(value)})")
    return value


def integer(parent: dict, key: str, path: str, low: int, high: int | None = None, default: Any = _MISSING) -> int:
    value = parent.get(key, default)
    if value is _MISSING or isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        bound = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
        raise SpecError(f"{path}{key}: must be {bound} (got {_show(value)})")
    return value


def number(parent: dict, key: str, path: str, low: float, high: float, default: Any = _MISSING,
           low_open: bool = False) -> float:
    value = parent.get(key, default)
    ok = value is not _MISSING and not isinstance(value, bool) and isinstance(value, (int, float)) \
        and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"{'(' if low_open else '['}{low}, {high}]"
        raise SpecError(f"{path}{key}: must be a number in {bound} (got {_show(value)})")
    return float(value)


def string(parent: dict, key: str, path: str, default: Any = _MISSING, prefix: str = "") -> str:
    value = parent.get(key, default)
    if not isinstance(value, str) or not value or not value.startswith(prefix):
        need = f"a string starting with {prefix!r}" if prefix else "a non-empty string"
        raise SpecError(f"{path}{key}: must be {need} (got {_show(value)})")
    return value


def _show(value: Any) -> str:
    return "nothing" if value is _MISSING else repr(value)[:120]
