"""Numba kernels that only the benchmarks use (none of them is part of ``rmt``).

* :func:`stream_pass`: one parallel read of ``X``, the memory-bandwidth floor that the
  Hessian products are compared with (``bench_hvp.py``, ``bench_scale.py``).
"""

from __future__ import annotations

from numba import njit, prange


@njit(cache=True, parallel=True, fastmath=True)
def stream_pass(X):
    """Sum of all entries of ``X``, read once in parallel: the one-pass memory-bandwidth floor.

    A product that reads every row of ``X`` once cannot stream ``X`` faster.  ``fastmath``
    lets the row sums vectorise, so that memory, not the adds, sets the time.
    """
    n, d = X.shape
    total = 0.0
    for i in prange(n):
        row = X[i]
        s = 0.0
        for t in range(d):
            s += row[t]
        total += s
    return total
