"""Multi-index data models (docs/theory.md section 1).

Covariates ``x ~ N(0, I_d)``, hidden directions ``Theta*`` (``d x k``, orthonormal columns),
``z = Theta*^T x`` and labels ``y = g(z) + noise * eps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ._validation import as_float_array, check_nonneg_float, check_positive_int


@dataclass(frozen=True)
class Target:
    """A registered link function ``g: R^k -> R`` applied row-wise to ``z`` of shape ``(N, k)``.

    ``k`` is the fixed index dimension, or ``None`` when any ``k`` works (then ``default_k``
    applies).  ``even`` records ``g(-z) = g(z)``, which makes ``E[z | y] = 0``.
    """

    name: str
    func: Callable[[np.ndarray], np.ndarray]
    k: int | None
    even: bool
    description: str
    default_k: int = 1


def _phase_retrieval(z):
    return z[:, 0] ** 2


def _abs(z):
    return np.abs(z[:, 0])


def _relu(z):
    return np.maximum(z[:, 0], 0.0)


def _linear(z):
    return z[:, 0].copy()


def _z1z2(z):
    return z[:, 0] * z[:, 1]


def _sign_z1z2(z):
    # +1 on the measure-zero set z1 z2 = 0, so labels are always +-1 (quadrature nodes hit it)
    return np.where(z[:, 0] * z[:, 1] >= 0, 1.0, -1.0)


def _norm2(z):
    return np.sum(z**2, axis=1) / z.shape[1]


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("phase_retrieval", _phase_retrieval, 1, True, "y = z^2"),
        Target("abs", _abs, 1, True, "y = |z|"),
        Target("relu", _relu, 1, False, "y = max(z, 0)"),
        Target("linear", _linear, 1, False, "y = z"),
        Target("z1z2", _z1z2, 2, True, "y = z1 z2"),
        Target("sign_z1z2", _sign_z1z2, 2, True, "y = sign(z1 z2)"),
        Target("norm2", _norm2, None, True, "y = |z|^2 / k", default_k=2),
    ]
}


@dataclass(frozen=True)
class Dataset:
    """Samples ``X`` (``n x d``), labels ``y`` (``n``) and, when known, ``theta`` (``d x k``).

    Arrays are validated and stored as float64: shapes must agree, entries must be finite and
    ``theta`` must have orthonormal columns (to 1e-8).
    """

    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray | None = None

    def __post_init__(self):
        X = as_float_array(self.X, "X", ndim=2)
        y = as_float_array(self.y, "y", ndim=1)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have one label per row of X ({X.shape[0]}); got {y.shape[0]}")
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X must have at least one row and column; got shape {X.shape}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        if self.theta is not None:
            theta = as_float_array(self.theta, "theta")
            if theta.ndim == 1:
                theta = theta[:, None]
            if theta.ndim != 2 or theta.shape[0] != X.shape[1]:
                raise ValueError(
                    f"theta must have shape (d, k) with d = {X.shape[1]}; got {theta.shape}"
                )
            gram = theta.T @ theta
            if not np.allclose(gram, np.eye(theta.shape[1]), atol=1e-8):
                raise ValueError("theta must have orthonormal columns (theta^T theta = I)")
            object.__setattr__(self, "theta", np.ascontiguousarray(theta))

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def k(self) -> int | None:
        return None if self.theta is None else self.theta.shape[1]

    @property
    def delta(self) -> float:
        """Sample ratio ``n / d``."""
        return self.n / self.d


def random_orthonormal(d: int, k: int, rng) -> np.ndarray:
    """A ``d x k`` matrix with Haar-random orthonormal columns (QR with sign fix)."""
    rng = np.random.default_rng(rng)
    q, r = np.linalg.qr(rng.standard_normal((d, k)))
    return q * np.sign(np.diag(r))


@dataclass(frozen=True)
class MultiIndexModel:
    """``y = g(Theta*^T x) + noise * N(0, 1)`` with ``x ~ N(0, I_d)``.

    Parameters
    ----------
    target : str or callable
        A registry name (see ``rmt.models.TARGETS``) or a callable ``g(z, rng) -> y`` with
        ``z`` of shape ``(N, k)``; a callable needs ``k``.
    k : int, optional
        Index dimension; defaults to the target's own.
    noise : float
        Standard deviation of additive Gaussian label noise.
    """

    target: str | Callable = "phase_retrieval"
    k: int | None = None
    noise: float = 0.0
    _target: Target | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "noise", check_nonneg_float(self.noise, "noise"))
        if callable(self.target):
            if self.k is None:
                raise ValueError("a callable target needs k, the number of hidden directions")
            object.__setattr__(self, "k", check_positive_int(self.k, "k"))
            return
        if not isinstance(self.target, str) or self.target not in TARGETS:
            known = ", ".join(sorted(TARGETS))
            raise ValueError(f"unknown target {self.target!r}; known: {known}")
        spec = TARGETS[self.target]
        object.__setattr__(self, "_target", spec)
        k = spec.k if spec.k is not None else spec.default_k
        if self.k is not None:
            k_in = check_positive_int(self.k, "k")
            if spec.k is not None and k_in != spec.k:
                raise ValueError(f"target {spec.name!r} has k = {spec.k}; got k = {k_in}")
            k = k_in
        object.__setattr__(self, "k", k)

    @property
    def name(self) -> str:
        return (
            self._target.name
            if self._target is not None
            else getattr(self.target, "__name__", "custom")
        )

    @property
    def is_registry(self) -> bool:
        """True for a registry target (a known link ``g(z)``), False for a custom callable."""
        return self._target is not None

    @property
    def deterministic(self) -> bool:
        """True when ``y`` is a fixed function of ``z`` (registry target and no noise)."""
        return self._target is not None and self.noise == 0.0

    @property
    def even(self) -> bool | None:
        """Whether ``g(-z) = g(z)``; ``None`` for a custom callable."""
        return None if self._target is None else self._target.even

    def link(self, z: np.ndarray) -> np.ndarray:
        """Noiseless link ``g(z)`` for a registry target, ``z`` of shape ``(N, k)``."""
        if self._target is None:
            raise TypeError("link() needs a registry target; call labels(z, rng) for a callable")
        return self._target.func(self._check_z(z))

    def labels(self, z: np.ndarray, rng=None) -> np.ndarray:
        """Labels ``g(z) + noise * eps`` for ``z`` of shape ``(N, k)``."""
        rng = np.random.default_rng(rng)
        z = self._check_z(z)
        if self._target is None:
            y = as_float_array(self.target(z, rng), "target(z, rng)", ndim=1)
            if y.shape[0] != z.shape[0]:
                raise ValueError(f"target returned {y.shape[0]} labels for {z.shape[0]} rows")
        else:
            y = self._target.func(z)
        if self.noise > 0:
            y = y + self.noise * rng.standard_normal(y.shape[0])
        return y

    def sample(self, n: int, d: int, rng=None, theta=None) -> Dataset:
        """Draw ``theta`` at random (or take the given one), then ``n`` samples in dimension ``d``.

        Passing the ``theta`` of a training set draws a held-out test set of the same model.
        """
        n = check_positive_int(n, "n")
        d = check_positive_int(d, "d")
        if d < self.k:
            raise ValueError(f"d must be at least k = {self.k}; got d = {d}")
        rng = np.random.default_rng(rng)
        if theta is None:
            theta = random_orthonormal(d, self.k, rng)
        else:
            theta = as_float_array(theta, "theta")
            theta = theta[:, None] if theta.ndim == 1 else theta
            if theta.shape != (d, self.k) or not np.allclose(
                theta.T @ theta, np.eye(self.k), atol=1e-8
            ):
                raise ValueError(
                    f"theta must be (d, k) = ({d}, {self.k}) with orthonormal columns; "
                    f"got shape {theta.shape}"
                )
        X = rng.standard_normal((n, d))
        y = self.labels(X @ theta, rng)
        return Dataset(X, y, theta)

    def _check_z(self, z) -> np.ndarray:
        z = as_float_array(z, "z", ndim=2)
        if z.shape[1] != self.k:
            raise ValueError(f"z must have k = {self.k} columns; got shape {z.shape}")
        return z
