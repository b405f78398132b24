"""Multi-index data models (docs/theory.md section 1).

Covariates ``x ~ N(0, I_d)``, hidden directions ``Theta*`` (``d x k``, orthonormal columns),
``z = Theta*^T x`` and labels ``y = g(z) + noise * eps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from rmt.validation import as_float_array, check_nonneg_float, check_positive_int


@dataclass(frozen=True, kw_only=True)
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
        Target(
            name="phase_retrieval", func=_phase_retrieval, k=1, even=True, description="y = z^2"
        ),
        Target(name="abs", func=_abs, k=1, even=True, description="y = |z|"),
        Target(name="relu", func=_relu, k=1, even=False, description="y = max(z, 0)"),
        Target(name="linear", func=_linear, k=1, even=False, description="y = z"),
        Target(name="z1z2", func=_z1z2, k=2, even=True, description="y = z1 z2"),
        Target(name="sign_z1z2", func=_sign_z1z2, k=2, even=True, description="y = sign(z1 z2)"),
        Target(
            name="norm2", func=_norm2, k=None, even=True, description="y = |z|^2 / k", default_k=2
        ),
    ]
}


@dataclass(frozen=True)
class Dataset:
    """Samples ``X`` (``n x d``), labels ``y`` (``n``) and, when known, ``theta`` (``d x k``).

    Arrays are validated and stored as float64: shapes must agree, entries must be finite and
    ``theta`` must have orthonormal columns (to 1e-8).  The one exception is float32 storage of
    ``X``: a float32 ndarray ``X`` is kept as float32 (C order; no copy when it already is),
    which halves its memory; every operator reads its rows and computes in float64.  ``y``
    and ``theta`` are always float64.
    """

    X: np.ndarray
    y: np.ndarray
    theta: np.ndarray | None = None

    def __post_init__(self):
        X = _as_storage_array(self.X)
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


def _as_storage_array(X) -> np.ndarray:
    """``X`` as float64 (:func:`as_float_array`), or as C-ordered float32 when it is a float32
    ndarray (float32 storage: no float64 copy is made); rank 2 and finite entries either way."""
    if not (isinstance(X, np.ndarray) and X.dtype == np.float32):
        return as_float_array(X, "X", ndim=2)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-dimensional; got shape {X.shape}")
    X = np.ascontiguousarray(X)
    bad = sum(int(np.count_nonzero(~np.isfinite(row))) for row in _row_chunks(X))
    if bad:
        raise ValueError(f"X must be finite; it has {bad} NaN or infinite entries")
    return X


def _row_chunks(X, rows: int = 4096):
    """Views of ``rows`` rows of ``X`` at a time (bounded temporaries for big arrays)."""
    return (X[lo : lo + rows] for lo in range(0, X.shape[0], rows))


#: storage dtypes of ``X`` that :meth:`MultiIndexModel.sample` draws
SAMPLE_DTYPES = (np.float64, np.float32)


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
        A registry name (see ``rmt.problem.models.TARGETS``) or a callable ``g(z, rng) -> y`` with
        ``z`` of shape ``(N, k)``; a callable needs ``k``.
    k : int, optional
        Index dimension; defaults to the target's own.
    noise : float
        Standard deviation of additive Gaussian label noise.
    even : bool, optional
        Whether ``g(-z) = g(z)`` (all coordinates flipped; in law, for a random ``g``), which
        makes ``E[z | y] = 0`` and a spectral threshold ``delta_alg > 0`` possible.  Fixed by a
        registry target (a contradicting value raises).  For a callable it can be declared;
        otherwise it is probed: ``g(-z, r) == g(z, r)`` (to 1e-12 relative) on
        :data:`PROBE_POINTS` Gaussian points with the same generator state ``r`` on both sides.
        The probe is exact for ``g`` that draws its randomness independently of ``z``; a ``g``
        even only in law (e.g. ``z^2 * s`` with ``s`` drawn after a ``z``-dependent number of
        draws) must be declared.

    A callable target is supported everywhere a registry one is (:func:`rmt.population_point`,
    :meth:`rmt.SpikeLaw.from_network`, :func:`rmt.delta_alg`, :func:`rmt.population_threshold`):
    expectations over ``z`` use its values at quadrature or Monte Carlo nodes.  Whether it uses
    its ``rng`` is probed (:attr:`deterministic`): a deterministic ``g`` gets Gauss-Hermite
    nodes, a random one Monte Carlo nodes with one draw of ``g`` per node.

    Raises
    ------
    ValueError
        For an unknown registry name, a callable without ``k``, a ``k`` or ``even`` that
        contradicts the registry target, or negative ``noise``.

    Notes
    -----
    See docs/theory.md section 1.1 (data: a multi-index model).

    Examples
    --------
    Phase retrieval, ``y = z^2`` with ``z = Theta*^T x``:

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> model.k, model.even, model.deterministic
    (1, True, True)
    >>> data = model.sample(500, 50, rng=0)
    >>> data.X.shape, data.theta.shape, data.delta
    ((500, 50), (50, 1), 10.0)
    >>> bool(np.allclose(data.y, (data.X @ data.theta)[:, 0] ** 2))
    True
    """

    target: str | Callable = "phase_retrieval"
    k: int | None = None
    noise: float = 0.0
    even: bool | None = None
    _target: Target | None = field(default=None, repr=False, compare=False)
    _random_g: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "noise", check_nonneg_float(self.noise, "noise"))
        if self.even is not None and not isinstance(self.even, (bool, np.bool_)):
            raise TypeError(f"even must be True, False or None; got {self.even!r}")
        if callable(self.target):
            if self.k is None:
                raise ValueError("a callable target needs k, the number of hidden directions")
            object.__setattr__(self, "k", check_positive_int(self.k, "k"))
            even, random_g = _probe_callable(self.target, self.k)
            object.__setattr__(self, "_random_g", random_g)
            object.__setattr__(self, "even", even if self.even is None else bool(self.even))
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
        if self.even is not None and bool(self.even) != spec.even:
            raise ValueError(f"target {spec.name!r} has even = {spec.even}; got even = {self.even}")
        object.__setattr__(self, "even", spec.even)

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
        """True when ``y`` is a fixed function of ``z``: no noise, and ``g`` a registry target or a
        callable that ignores its ``rng`` (probed: two generator seeds give the same labels)."""
        return self.noise == 0.0 and not self._random_g

    @property
    def random_link(self) -> bool:
        """True for a callable ``g`` that uses its ``rng`` (its labels differ between seeds)."""
        return self._random_g

    def link(self, z: np.ndarray, rng=0) -> np.ndarray:
        """``g(z)`` without the additive noise, ``z`` of shape ``(N, k)``.

        For a callable this is ``g(z, default_rng(rng))``: one draw per row when ``g`` is random
        (seed 0 by default, so repeated calls agree).
        """
        z = self._check_z(z)
        if self._target is not None:
            return self._target.func(z)
        return _call_target(self.target, z, np.random.default_rng(rng))

    def labels(self, z: np.ndarray, rng=None) -> np.ndarray:
        """Labels ``g(z) + noise * eps`` for ``z`` of shape ``(N, k)``."""
        rng = np.random.default_rng(rng)
        z = self._check_z(z)
        if self._target is None:
            y = _call_target(self.target, z, rng)
        else:
            y = self._target.func(z)
        if self.noise > 0:
            y = y + self.noise * rng.standard_normal(y.shape[0])
        return y

    def sample(self, n: int, d: int, rng=None, theta=None, dtype=np.float64) -> Dataset:
        """Draw ``theta`` at random (or take the given one), then ``n`` samples in dimension ``d``.

        Passing the ``theta`` of a training set draws a held-out test set of the same model.
        ``dtype=np.float32`` stores ``X`` as float32 (half the memory): the draw is the float64
        draw of the same ``rng`` rounded to float32, made in row blocks (no float64 copy of
        ``X``), and the labels are those of the float64 draw (``z`` of the unrounded rows).
        """
        n = check_positive_int(n, "n")
        d = check_positive_int(d, "d")
        dtype = _check_sample_dtype(dtype)
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
        if dtype == np.float64:
            X = rng.standard_normal((n, d))
            z = X @ theta
        else:
            X, z = _draw_float32(rng, n, d, theta)
        y = self.labels(z, rng)
        return Dataset(X, y, theta)

    def _check_z(self, z) -> np.ndarray:
        z = as_float_array(z, "z", ndim=2)
        if z.shape[1] != self.k:
            raise ValueError(f"z must have k = {self.k} columns; got shape {z.shape}")
        return z


#: number of Gaussian points at which a callable target is probed for evenness and randomness
PROBE_POINTS = 4096


def _check_sample_dtype(dtype) -> type:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in SAMPLE_DTYPES:
        raise ValueError(f"dtype must be np.float64 or np.float32; got {dtype!r}")
    return dt.type


def _draw_float32(rng, n: int, d: int, theta, block_bytes: int = 64 * 2**20):
    """``(X, z)``: ``X`` the float64 draw ``rng.standard_normal((n, d))`` rounded to float32,
    drawn in row blocks of about ``block_bytes`` (the stream is the same as one draw), and
    ``z = X theta`` of the float64 rows."""
    X = np.empty((n, d), dtype=np.float32)
    z = np.empty((n, theta.shape[1]))
    rows = max(1, block_bytes // (8 * d))
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        blk = rng.standard_normal((hi - lo, d))
        z[lo:hi] = blk @ theta
        X[lo:hi] = blk
    return X, z


def _call_target(g, z, rng) -> np.ndarray:
    y = as_float_array(g(z, rng), "target(z, rng)", ndim=1)
    if y.shape[0] != z.shape[0]:
        raise ValueError(f"target returned {y.shape[0]} labels for {z.shape[0]} rows")
    return y


def _probe_callable(g, k) -> tuple[bool, bool]:
    """``(even, random)`` of a callable target, probed on :data:`PROBE_POINTS` points.

    ``even``: ``g(-z, r) == g(z, r)`` with equal generator states; ``random``: two seeds of the
    generator give different labels.  Equality is to ``1e-12 (1 + |y|)``.
    """
    z = np.random.default_rng(12345).standard_normal((PROBE_POINTS, k))
    y = _call_target(g, z, np.random.default_rng(1))
    y_neg = _call_target(g, -z, np.random.default_rng(1))
    y_other = _call_target(g, z, np.random.default_rng(2))
    tol = 1e-12 * (1.0 + np.abs(y))
    return bool(np.all(np.abs(y_neg - y) <= tol)), bool(np.any(np.abs(y_other - y) > tol))
