"""Input checks shared by the public API.

Each message says what was expected and what arrived (STYLE.md habit 3).
"""

from __future__ import annotations

import numpy as np


def as_float_array(x, name: str, ndim: int | None = None, finite: bool = True) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array, checking its rank and finiteness.

    Parameters
    ----------
    x : array_like
    name : str
        The argument's name, for the messages.
    ndim : int, optional
        The rank required.
    finite : bool
        Require every entry finite.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    TypeError
        When ``x`` is not a real numeric array.
    ValueError
        For another rank, or a NaN or infinite entry (with ``finite``).

    Examples
    --------
    >>> from rmt.validation import as_float_array
    >>> as_float_array([1, 2], "y", ndim=1)
    array([1., 2.])
    >>> as_float_array([1.0, float("nan")], "y")
    Traceback (most recent call last):
    ...
    ValueError: y must be finite; it has 1 NaN or infinite entries
    """
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
    """Return ``value`` as an int, requiring ``value >= minimum``.

    Parameters
    ----------
    value : int
    name : str
        The argument's name, for the messages.
    minimum : int

    Returns
    -------
    int

    Raises
    ------
    TypeError
        When ``value`` is not an integer (a bool is refused).
    ValueError
        When it is below ``minimum``.

    Examples
    --------
    >>> import numpy as np
    >>> from rmt.validation import check_positive_int
    >>> check_positive_int(np.int64(3), "steps")
    3
    >>> check_positive_int(0, "steps")
    Traceback (most recent call last):
    ...
    ValueError: steps must be >= 1; got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def check_nonneg_float(value, name: str) -> float:
    """Return ``value`` as a finite float that is >= 0.

    Parameters
    ----------
    value : real
    name : str
        The argument's name, for the messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        When ``value`` is not a real number.
    ValueError
        When it is negative or not finite.
    """
    out = _real(value, name)
    if not np.isfinite(out) or out < 0:
        raise ValueError(f"{name} must be finite and >= 0; got {value!r}")
    return out


def check_positive_float(value, name: str) -> float:
    """Return ``value`` as a finite float that is > 0.

    Parameters
    ----------
    value : real
    name : str
        The argument's name, for the messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        When ``value`` is not a real number.
    ValueError
        When it is not positive or not finite.
    """
    out = _real(value, name)
    if not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be finite and > 0; got {value!r}")
    return out


def _real(value, name: str) -> float:
    """``value`` as a float; TypeError naming ``name`` when it is not a real number."""
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number; got {value!r}") from exc


def check_choice(value, name: str, choices) -> str:
    """Check that ``value`` is one of ``choices``; the message lists the known ones.

    Parameters
    ----------
    value : object
    name : str
        The argument's name, for the messages.
    choices : collection of str

    Returns
    -------
    object
        ``value``.

    Raises
    ------
    ValueError
        When ``value`` is not among ``choices``.
    """
    if value not in choices:
        known = ", ".join(sorted(choices))
        raise ValueError(f"unknown {name} {value!r}; known: {known}")
    return value
