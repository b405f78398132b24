"""The empirical first-layer Hessian as a matrix-free operator (THEORY.md section 2)."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ._validation import check_nonneg_float
from .kernels.hessian import default_chunks, dense_hessian, fused_product
from .models import Dataset
from .network import TwoLayerNet


def stack_block(op, V) -> np.ndarray:
    """Check ``V`` (``m*d x b``) and stack its neuron rows as ``Vt`` (``b*m x d``).

    Column ``c`` of ``V`` is ``(m, d)`` neuron-major, so ``V.T.reshape(b*m, d)`` stacks the rows.
    Shared by every first-layer Hessian operator (in memory, streaming, distributed).
    """
    V = np.asarray(V, dtype=np.float64)
    if V.ndim != 2 or V.shape[0] != op.shape[0]:
        raise ValueError(f"V must have shape ({op.shape[0]}, b); got {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError("V must be finite")
    return np.ascontiguousarray(V.T).reshape(V.shape[1] * op.m, op.d)


def finish_product(op, out, Vt) -> np.ndarray:
    """``H V`` from ``out = sum_i x_i r_i^T`` (stacked like ``Vt``): scale by ``1/n``, add the
    weight decay, count the pass and its vectors, and unstack to ``m*d x b``."""
    b = Vt.shape[0] // op.m
    out *= 1.0 / op.n
    if op.weight_decay:
        out += op.weight_decay * Vt
    op.n_matvec += b
    op.n_passes += 1
    return np.ascontiguousarray(out.reshape(b, op.m * op.d).T)


def symmetric_operator(op) -> LinearOperator:
    """A symmetric float64 scipy ``LinearOperator`` over ``op.matvec`` and ``op.matmat``."""
    return LinearOperator(
        op.shape,
        matvec=op.matvec,
        matmat=op.matmat,
        rmatvec=op.matvec,
        rmatmat=op.matmat,
        dtype=np.float64,
    )


class SelfAdjointOperator(LinearOperator):
    """Base of the out-of-memory Hessians: a symmetric scipy ``LinearOperator`` that is its own
    adjoint and its own ``as_linear_operator()``; subclasses define ``_matmat``."""

    def _matvec(self, v):
        return self._matmat(np.asarray(v).reshape(-1, 1)).reshape(-1)

    def _rmatvec(self, v):
        return self._matvec(v)

    def _rmatmat(self, V):
        return self._matmat(V)

    def _adjoint(self):
        return self

    def as_linear_operator(self) -> LinearOperator:
        """The operator itself (it is already a symmetric float64 ``LinearOperator``)."""
        return self


class Hessian:
    """First-layer Hessian of the mean loss plus ``weight_decay/2 ||W||_F^2``.

        H = (1/n) sum_i D_i (x) x_i x_i^T + weight_decay I

    Vectors are neuron-major: ``v.reshape(m, d)[j]`` is the direction of ``w_j``.

    Attributes
    ----------
    D : ndarray (n, m, m)
        Per-sample curvature blocks.
    shape : tuple
        ``(m*d, m*d)``.
    n_matvec : int
        Number of vectors multiplied so far (a block of ``b`` counts ``b``).
    n_passes : int
        Number of passes over ``X`` so far (a block product counts one).
    """

    dtype = np.dtype(np.float64)

    def __init__(self, net: TwoLayerNet, data: Dataset, W, weight_decay=0.0):
        if not isinstance(net, TwoLayerNet):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        if not isinstance(data, Dataset):
            raise TypeError(f"data must be an rmt.Dataset; got {type(data).__name__}")
        self.net = net
        self.data = data
        self.W = net.check_weights(W, data.d)
        self.weight_decay = check_nonneg_float(weight_decay, "weight_decay")
        self.D = net.curvature(data.X @ self.W, data.y)
        self.n, self.d = data.X.shape
        self.m = net.width
        self.shape = (self.m * self.d, self.m * self.d)
        self.n_matvec = 0
        self.n_passes = 0
        self.n_chunks = default_chunks()

    def __repr__(self):
        return f"Hessian(n={self.n}, d={self.d}, m={self.m}, weight_decay={self.weight_decay})"

    def matvec(self, v) -> np.ndarray:
        """``H v`` for ``v`` of shape ``(m*d,)``."""
        v = np.asarray(v)
        if v.shape not in ((self.shape[0],), (self.shape[0], 1)):
            raise ValueError(f"v must have shape ({self.shape[0]},); got {v.shape}")
        return self.matmat(v.reshape(-1, 1)).reshape(v.shape)

    def matmat(self, V) -> np.ndarray:
        """``H V`` for ``V`` of shape ``(m*d, b)``, in one pass over ``X``.

        Dispatches on the block's ``b*m`` columns and on ``m``: explicit-SIMD kernels for 8, 16,
        24 or 32 columns (``rmt.kernels.simd``), else unrolled kernels for ``m <= 4``
        (``rmt.kernels.hvp_small``), else the generic ``rmt.kernels.hessian.hvp_fused``; all
        take the whole block at once.
        """
        Vt = stack_block(self, V)
        return finish_product(self, fused_product(self.data.X, self.D, Vt, self.n_chunks), Vt)

    def to_dense(self) -> np.ndarray:
        """The dense ``(m d) x (m d)`` matrix, assembled by the Numba reference kernel."""
        return dense_hessian(self.data.X, self.D, self.weight_decay)

    def as_linear_operator(self) -> LinearOperator:
        """A scipy ``LinearOperator`` that calls the fused product (symmetric, float64)."""
        return symmetric_operator(self)
