"""Input checks shared by the public API (STYLE.md habit 3: say what was expected and what arrived)."""

from __future__ import annotations

import numpy as np


def as_float_array(x, name: str, ndim: int | None = None, finite: bool = True) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array, checking its rank and finiteness."""
    try:
        arr = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real numeric array; got {type(x).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional; got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite; it has {bad} NaN or infinite entries")
    return arr


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, requiring ``value >= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def check_nonneg_float(value, name: str) -> float:
    """Return ``value`` as a finite float that is >= 0."""
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number; got {value!r}") from exc
    if not np.isfinite(out) or out < 0:
        raise ValueError(f"{name} must be finite and >= 0; got {value!r}")
    return out


def check_positive_float(value, name: str) -> float:
    """Return ``value`` as a finite float that is > 0."""
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number; got {value!r}") from exc
    if not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value!r}")
    return out


def check_choice(value, name: str, choices) -> str:
    """Check that ``value`` is one of ``choices``; the message lists the known ones."""
    if value not in choices:
        known = ", ".join(sorted(choices))
        raise ValueError(f"unknown {name} {value!r}; known: {known}")
    return value
