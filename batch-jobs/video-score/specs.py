"""Reading a stage's spec: each bad field is a SpecError naming the field and the value received."""
from __future__ import annotations

from typing import Any


class SpecError(ValueError):
    """A spec field is missing or malformed."""


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)


def field(spec: dict, name: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    """A required field of the given type (a bool is not an int)."""
    value = spec.get(name)
    if not _is(value, kind):
        raise SpecError(f"{where}{name}: expected {getattr(kind, '__name__', kind)} (got {value!r})")
    return value


def optional(spec: dict, name: str, kind: type | tuple[type, ...], default: Any, where: str = "") -> Any:
    """A field that may be absent or null (then `default`), else of the given type."""
    if spec.get(name) is None:
        return default
    return field(spec, name, kind, where)


def number(spec: dict, name: str, default: float, low: float, high: float) -> float:
    """An optional number in (low, high]."""
    value = optional(spec, name, (int, float), default)
    if not low < value <= high:
        raise SpecError(f"{name}: expected a number above {low} and at most {high} (got {value!r})")
    return float(value)


def s3_uri(spec: dict, name: str, where: str = "") -> str:
    value = field(spec, name, str, where)
    if not value.startswith("s3://") or len(value) <= len("s3://"):
        raise SpecError(f"{where}{name}: expected an s3:// URI (got {value!r})")
    return value
