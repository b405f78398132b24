"""The empirical first-layer Hessian as a matrix-free operator (docs/theory.md section 2)."""

from __future__ import annotations

import numpy as np

from rmt.kernels.hessian import default_chunks, dense_hessian, fused_product, preactivations
from rmt.kernels.threads import adaptive_threads
from rmt.operators.base import SymmetricOperator
from rmt.problem.models import Dataset
from rmt.problem.network import TwoLayerNet
from rmt.validation import check_nonneg_float


def neuron_rows(V, m: int, d: int) -> np.ndarray:
    """``V`` (``m*d x b``, float64) with its neuron rows stacked as ``Vt`` (``b*m x d``).

    Column ``c`` of ``V`` is ``(m, d)`` neuron-major, so ``V.T.reshape(b*m, d)`` stacks the rows.
    Shared by every first-layer Hessian operator (in memory, streaming, distributed).
    """
    return np.ascontiguousarray(V.T).reshape(V.shape[1] * m, d)


def finish_product(out, Vt, m: int, n: int, weight_decay: float) -> np.ndarray:
    """``H V`` from ``out = sum_i x_i r_i^T`` (``b*m x d``, stacked like ``Vt``): scale by
    ``1/n``, add ``weight_decay * Vt`` and unstack to ``m*d x b``; ``out`` is overwritten."""
    b = Vt.shape[0] // m
    out *= 1.0 / n
    if weight_decay:
        out += weight_decay * Vt
    return np.ascontiguousarray(out.reshape(b, m * Vt.shape[1]).T)


class Hessian(SymmetricOperator):
    """First-layer Hessian of the mean loss plus ``weight_decay/2 ||W||_F^2``.

        H = (1/n) sum_i D_i (x) x_i x_i^T + weight_decay I

    Vectors are neuron-major: ``v.reshape(m, d)[j]`` is the direction of ``w_j``.  It is a
    :class:`rmt.operators.base.SymmetricOperator` (a symmetric float64 scipy ``LinearOperator``),
    which checks the inputs and counts the products.

    ``X`` may be stored as float32 (``model.sample(..., dtype=np.float32)`` or a float32
    ``Dataset``): every kernel then reads float32 rows and accumulates in float64 (``U = X W``
    too), and no float64 copy of ``X`` is made, so ``X`` takes half the memory and a product
    reads half the bytes.  The operator is then exactly the float64 operator of the rounded
    ``X``, within about ``1e-16 ||H||``.  When float32 ``X`` is enough: the rounding moves each
    entry by at most ``6e-8`` relative, so eigenvalues move by about ``6e-8 ||H||``, far below
    the finite-size fluctuations of the edges and outliers (about ``d^{-2/3}``, ``1e-2`` at
    ``d = 1000``).  What is lost: the last eight digits of the draw, so float32 and float64
    results agree to ``1e-6 ||H||``, not bit for bit; and studies that resolve eigenvalue gaps
    below ``1e-6 ||H||`` need float64.

    Attributes
    ----------
    net, data, W, weight_decay :
        The network, the ``rmt.Dataset``, the checked weights ``(d, m)`` and the weight decay.
    n, d, m : int
        Samples, input dimension, width.
    D : ndarray (n, m, m)
        Per-sample curvature blocks.
    shape : tuple
        ``(m*d, m*d)``.
    n_chunks : int
        Row chunks of the fused product (fixed, so results do not depend on the thread count).
    n_matvec : int
        Number of vectors multiplied so far (a block of ``b`` counts ``b``).
    n_passes : int
        Number of passes over ``X`` so far (a block product counts one).

    Raises
    ------
    TypeError
        When ``net`` is not a :class:`rmt.TwoLayerNet` or ``data`` not a :class:`rmt.Dataset`.
    ValueError
        For ``W`` not of shape ``(d, m)`` or a negative ``weight_decay``.

    Notes
    -----
    See docs/theory.md sections 2.1-2.2 (curvature blocks and the Hessian-vector product).

    Examples
    --------
    The operator against the dense sum ``(1/n) sum_i D_i (x) x_i x_i^T`` built with numpy:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(500, 50, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> W = np.random.default_rng(1).standard_normal((50, 2)) / np.sqrt(50)
    >>> H = rmt.Hessian(net, data, W)
    >>> H.shape
    (100, 100)
    >>> dense = np.einsum("nij,na,nb->iajb", H.D, data.X, data.X).reshape(100, 100) / 500
    >>> v = np.random.default_rng(2).standard_normal(100)
    >>> bool(np.allclose(H @ v, dense @ v)), bool(np.allclose(H.to_dense(), dense))
    (True, True)
    """

    def __init__(self, net: TwoLayerNet, data: Dataset, W, weight_decay=0.0):
        if not isinstance(net, TwoLayerNet):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        if not isinstance(data, Dataset):
            raise TypeError(f"data must be an rmt.Dataset; got {type(data).__name__}")
        self.net = net
        self.data = data
        self.W = net.check_weights(W, data.d)
        self.weight_decay = check_nonneg_float(weight_decay, "weight_decay")
        self.D = net.curvature(preactivations(data.X, self.W), data.y)
        self.n, self.d = data.X.shape
        self.m = net.width
        self.n_chunks = default_chunks()
        super().__init__((self.m * self.d, self.m * self.d))

    def __repr__(self):
        return f"Hessian(n={self.n}, d={self.d}, m={self.m}, weight_decay={self.weight_decay})"

    def _matmat(self, V) -> np.ndarray:
        """``H V`` for ``V`` of shape ``(m*d, b)``, in one pass over ``X``.

        Dispatches on the block's ``b*m`` columns, on ``m`` and on the SIMD path
        (``rmt.kernels.simd.SIMD_TARGET``: ``avx512``, ``avx2`` or ``portable``): explicit-SIMD
        kernels for 8, 16, 24 or 32 columns (``rmt.kernels.simd``), else unrolled kernels for
        ``m <= 4`` (``rmt.kernels.hvp_small``, rows per step sized for the registers), else the
        generic ``rmt.kernels.hessian.hvp_fused``; all take the whole block at once.
        """
        Vt = neuron_rows(V, self.m, self.d)
        out = fused_product(self.data.X, self.D, Vt, self.n_chunks)
        return finish_product(out, Vt, self.m, self.n, self.weight_decay)

    @adaptive_threads
    def to_dense(self) -> np.ndarray:
        """The dense ``(m d) x (m d)`` matrix, assembled by the Numba reference kernel."""
        return dense_hessian(self.data.X, self.D, self.weight_decay)
