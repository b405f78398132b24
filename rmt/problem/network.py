"""Two-layer network ``f(x; W) = sum_j a_j sigma(w_j^T x)`` with a fixed second layer.

Activations (exact ``sigma, sigma', sigma''``): ``tanh``, ``quadratic`` (u^2), ``cubic`` (u^3),
``softplus``, ``erf`` and ``relu``.  For ``relu`` we use ``sigma'' = 0``, true almost
everywhere; the Hessian then misses the singular part at the kink, which has probability zero
under Gaussian data but means finite differences across a kink do not match.

Losses (``l(y, f)`` with ``l' = dl/df`` and ``l'' = d2l/df2``):
``square`` ``(f-y)^2/2``; ``logistic`` ``log(1+exp(-y f))`` for labels +-1; ``huber`` with
threshold ``huber_delta``: ``r^2/2`` for ``|r| <= c``, else ``c |r| - c^2/2``, ``r = f - y``.
"""

from __future__ import annotations

import numpy as np

from rmt.kernels import elementwise as ew
from rmt.kernels.curvature import SERIAL_MAX_ROWS, curvature_blocks_serial
from rmt.kernels.hessian import curvature_blocks
from rmt.problem.models import Dataset
from rmt.validation import as_float_array, check_choice, check_nonneg_float, check_positive_int

ACTIVATIONS = tuple(ew.ACTIVATIONS)
LOSSES = tuple(ew.LOSSES)
#: activations whose second derivative vanishes almost everywhere
ZERO_CURVATURE_ACTIVATIONS = ("relu",)
#: losses convex in the network output (``l'' >= 0``)
CONVEX_LOSSES = ("square", "logistic", "huber")


class TwoLayerNet:
    """Two-layer network with trainable first layer ``W`` (``d x m``) and fixed ``a``.

    Parameters
    ----------
    width : int
        Number of hidden neurons ``m``.
    activation : str
        One of ``rmt.problem.network.ACTIVATIONS``.
    loss : str
        One of ``rmt.problem.network.LOSSES``.
    a : array_like, optional
        Second layer, default ``np.full(width, 1/width)``.
    huber_delta : float
        Threshold of the Huber loss (ignored by the others).

    Raises
    ------
    ValueError
        For an unknown activation or loss, ``huber_delta = 0`` with the Huber loss, or ``a``
        of the wrong length.

    Notes
    -----
    See docs/theory.md sections 1.2-1.3 (the network, its losses and its gradient).

    Examples
    --------
    The outputs and the mean square loss against numpy:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(500, 50, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> W = np.random.default_rng(1).standard_normal((50, 2)) / np.sqrt(50)
    >>> f = np.tanh(data.X @ W) @ net.a
    >>> bool(np.allclose(net.forward(data.X, W), f))
    True
    >>> loss, grad = net.loss_and_grad(data, W)
    >>> bool(np.isclose(loss, np.mean((f - data.y) ** 2) / 2)), grad.shape
    (True, (50, 2))
    """

    def __init__(self, width, activation="tanh", loss="square", a=None, huber_delta=1.0):
        self.width = check_positive_int(width, "width")
        self.activation = check_choice(activation, "activation", ew.ACTIVATIONS)
        self.loss = check_choice(loss, "loss", ew.LOSSES)
        self.huber_delta = check_nonneg_float(huber_delta, "huber_delta")
        if self.loss == "huber" and self.huber_delta == 0:
            raise ValueError("huber_delta must be > 0 for the huber loss")
        if a is None:
            a = np.full(self.width, 1.0 / self.width)
        a = as_float_array(a, "a", ndim=1)
        if a.shape[0] != self.width:
            raise ValueError(f"a must have length width = {self.width}; got {a.shape[0]}")
        self.a = a

    def __repr__(self):
        return (
            f"TwoLayerNet(width={self.width}, activation={self.activation!r}, "
            f"loss={self.loss!r}, huber_delta={self.huber_delta})"
        )

    @property
    def act_code(self) -> int:
        return ew.ACTIVATIONS[self.activation]

    @property
    def loss_code(self) -> int:
        return ew.LOSSES[self.loss]

    @property
    def hessian_is_psd(self) -> bool:
        """Whether the Hessian of the empirical loss is positive semidefinite at every ``W``.

        It is when ``sigma'' = 0`` almost everywhere (``relu``) and the loss is convex in the
        output (every loss of :data:`LOSSES`): then each curvature block is
        ``D_i = l''(y_i, f_i) (a o sigma'(u_i)) (a o sigma'(u_i))^T >= 0`` (docs/theory.md 8.11),
        and weight decay only adds a nonnegative multiple of the identity.
        """
        return self.activation in ZERO_CURVATURE_ACTIVATIONS and self.loss in CONVEX_LOSSES

    # -- elementwise pieces, shared with the theory ------------------------------------
    def sigma(self, U):
        """``(sigma, sigma', sigma'')`` at every entry of ``U``."""
        return ew.activation_values(self.act_code, U)

    def loss_derivatives(self, y, f):
        """``(l, l', l'')`` at every pair ``(y_i, f_i)``."""
        return ew.loss_values(self.loss_code, y, f, self.huber_delta)

    def curvature(self, U, y):
        """Curvature blocks ``D_i`` (``N x m x m``, docs/theory.md section 2) from pre-activations.

        ``U`` has shape ``(N, m)`` (``u_i = W^T x_i``) and ``y`` shape ``(N,)``.  Below
        ``SERIAL_MAX_ROWS`` rows a serial kernel with the same arithmetic (bit-identical blocks)
        avoids waiting for the threads of the parallel one (rmt/kernels/curvature.py).
        """
        U = as_float_array(U, "U", ndim=2)
        y = as_float_array(y, "y", ndim=1)
        if U.shape[1] != self.width or U.shape[0] != y.shape[0]:
            raise ValueError(
                f"U must have shape (N, {self.width}) with N = len(y) = {y.shape[0]}; got {U.shape}"
            )
        self.check_labels(y)
        N, m = U.shape
        D = np.empty((N, m, m))
        f = np.empty(N)
        dl = np.empty(N)
        kernel = curvature_blocks_serial if N < SERIAL_MAX_ROWS else curvature_blocks
        kernel(U, y, self.a, self.act_code, self.loss_code, self.huber_delta, D, f, dl)
        return D

    def kinks(self, U, y):
        """Functions whose zeros are the jumps of ``D`` (``N x q``; ``q = 0`` for a smooth
        network): ``|f - y| - huber_delta`` for the Huber loss (``l''`` jumps there) and the
        columns of ``U`` for ReLU (``sigma'`` jumps at 0).  ``rmt.freeprob.nodes.inner_kink_counts``
        counts their sign changes."""
        U = as_float_array(U, "U", ndim=2)
        y = as_float_array(y, "y", ndim=1)
        cols = []
        if self.loss == "huber":
            f = self.sigma(U)[0] @ self.a
            cols.append((np.abs(f - y) - self.huber_delta)[:, None])
        if self.activation == "relu":
            cols.append(U)
        return np.concatenate(cols, axis=1) if cols else np.empty((U.shape[0], 0))

    # -- network -----------------------------------------------------------------------
    def check_weights(self, W, d: int) -> np.ndarray:
        """Validate ``W`` of shape ``(d, width)`` and return it as float64."""
        W = as_float_array(W, "W", ndim=2)
        if W.shape != (d, self.width):
            raise ValueError(f"W must have shape (d, width) = ({d}, {self.width}); got {W.shape}")
        return W

    def forward(self, X, W) -> np.ndarray:
        """Network outputs ``f(x_i; W)`` for the rows of ``X``."""
        X = as_float_array(X, "X", ndim=2)
        W = self.check_weights(W, X.shape[1])
        s, _, _ = self.sigma(X @ W)
        return s @ self.a

    def loss_and_grad(self, data: Dataset, W, weight_decay=0.0):
        """Mean loss plus ``weight_decay/2 ||W||_F^2`` and its gradient (shape of ``W``).

        ``grad_{w_j} = (1/n) sum_i l'(y_i, f_i) a_j sigma'(u_ij) x_i + weight_decay w_j``.
        """
        if not isinstance(data, Dataset):
            raise TypeError(f"data must be an rmt.Dataset; got {type(data).__name__}")
        wd = check_nonneg_float(weight_decay, "weight_decay")
        W = self.check_weights(W, data.d)
        self.check_labels(data.y)
        s, ds, _ = self.sigma(data.X @ W)
        f = s @ self.a
        ell, dl, _ = self.loss_derivatives(data.y, f)
        G = (dl[:, None] * ds) * self.a[None, :]
        grad = data.X.T @ G / data.n + wd * W
        value = float(np.mean(ell)) + 0.5 * wd * float(np.sum(W * W))
        return value, grad

    def check_labels(self, y):
        """Raise ValueError when the labels do not suit the loss (logistic needs +-1)."""
        if self.loss == "logistic" and not np.all(np.abs(y) == 1.0):
            raise ValueError("the logistic loss needs labels in {-1, +1}; use a sign target")
