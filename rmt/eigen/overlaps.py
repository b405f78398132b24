"""Overlap of Hessian eigenvectors with the hidden directions (neuron-major vectors)."""

from __future__ import annotations

import numpy as np

from rmt.validation import as_float_array, check_positive_int


def overlaps(vectors, theta, m) -> np.ndarray:
    """Squared overlap of each eigenvector with ``R^m (x) span(theta)``.

    For unit ``v`` of length ``m d``, neuron-major (``v.reshape(m, d)[j]`` is neuron ``j``),
    and ``theta`` (``d x r``) with orthonormal columns this is ``sum_j ||theta^T v_j||^2``, a
    number in ``[0, 1]``.  Columns of ``theta`` that are not orthonormal are replaced by an
    orthonormal basis of their span (the overlap depends only on the span).

    Parameters
    ----------
    vectors : ndarray (m*d,) or (m*d, k)
    theta : ndarray (d,) or (d, r), full column rank
    m : int
        Number of neurons.

    Returns
    -------
    ndarray (k,)

    Raises
    ------
    ValueError
        For shapes that do not match ``m * d`` or a ``theta`` without full column rank.

    Notes
    -----
    See docs/theory.md section 1.4 (vector layout and overlaps with ``Theta*``).

    Examples
    --------
    A vector whose neurons both lie along ``theta`` has overlap 1; random vectors get the sum
    over neurons of their squared projections:

    >>> import numpy as np
    >>> import rmt
    >>> theta = np.linalg.qr(np.random.default_rng(0).standard_normal((50, 1)))[0]
    >>> v = np.concatenate([0.6 * theta[:, 0], 0.8 * theta[:, 0]])
    >>> print(np.round(rmt.overlaps(v, theta, m=2), 6))
    [1.]
    >>> V = np.random.default_rng(1).standard_normal((100, 3))
    >>> V /= np.linalg.norm(V, axis=0)
    >>> ref = [(theta[:, 0] @ V[:50, c]) ** 2 + (theta[:, 0] @ V[50:, c]) ** 2 for c in range(3)]
    >>> bool(np.allclose(rmt.overlaps(V, theta, m=2), ref))
    True
    """
    m = check_positive_int(m, "m")
    V = as_float_array(vectors, "vectors")
    if V.ndim == 1:
        V = V[:, None]
    if V.ndim != 2:
        raise ValueError(f"vectors must have shape (m*d,) or (m*d, k); got {V.shape}")
    T = as_float_array(theta, "theta")
    if T.ndim == 1:
        T = T[:, None]
    if T.ndim != 2 or T.shape[1] > T.shape[0]:
        raise ValueError(f"theta must have shape (d,) or (d, r) with r <= d; got {T.shape}")
    d = T.shape[0]
    if V.shape[0] != m * d:
        raise ValueError(f"vectors must have m*d = {m}*{d} = {m * d} rows; got {V.shape[0]}")
    basis, r_factor = np.linalg.qr(T)
    diag = np.abs(np.diag(r_factor))
    if diag.min() <= 1e-12 * max(diag.max(), np.finfo(float).tiny):
        raise ValueError("theta must have full column rank")
    k = V.shape[1]
    blocks = V.T.reshape(k, m, d)  # blocks[c, j] is neuron j of vector c
    projected = blocks @ basis  # (k, m, r)
    return np.sum(projected**2, axis=(1, 2))
