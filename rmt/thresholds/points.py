"""Post-first-phase points: the population point and the trained point (docs/theory.md section 6).

Two ways to pick the weights ``W`` at which the Hessian of sections 2-4 is studied:

* :func:`population_point` minimises the population risk over ``Q = W^T W`` (with
  ``W^T Theta* = M`` fixed, default ``M = 0``) by quadrature, and :meth:`PointSpec.draw` turns
  the result into a concrete ``W`` in dimension ``d``.  The theory of sections 3-4 is exact for
  such a ``W``, since it does not depend on the sample.
* :class:`TrainedPoint` runs full-batch gradient descent from a small random start
  (:func:`rmt.gradient_descent`) and takes the plateau ``W1`` at the end of the first phase
  (docs/theory.md section 7); the escape from it is :mod:`rmt.dynamics.escape`'s.

Each kind of point is one subclass of :class:`Point` (population, trained, zero, given),
registered in :data:`POINT_KINDS`; :func:`make_point` builds the one a ``RunConfig`` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.optimize import minimize

from rmt.dynamics.descent import gradient_descent
from rmt.problem.models import MultiIndexModel
from rmt.problem.network import TwoLayerNet
from rmt.problem.quadrature import gauss_hermite, monte_carlo
from rmt.validation import as_float_array, check_choice, check_nonneg_float, check_positive_int

MIN_GAUSS_HERMITE_ORDER = 10
MAX_GAUSS_HERMITE_ORDER = 40


# ---------------------------------------------------------------------------------------------
# population risk by quadrature
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class _RiskNodes:
    """Joint nodes for ``(z, g)`` with labels ``y`` attached, plus an additive risk constant.

    ``z`` is ``(N, k)``, ``g`` is ``(N, m)``, ``y`` is ``(N,)``.  For the square loss the label
    noise is integrated analytically and enters as ``const = noise^2 / 2``; otherwise it is one
    more Gaussian dimension of the nodes and ``const = 0``.
    """

    z: np.ndarray
    g: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    const: float
    kind: str
    order: int | None


def _risk_nodes(model, net, method, order, max_nodes, n_mc, rng) -> _RiskNodes:
    """Build Gauss-Hermite nodes while ``order**dim <= max_nodes`` allows ``order >= 10``."""
    k, m = model.k, net.width
    noise_dim = int(model.noise > 0 and net.loss != "square")
    dim = k + m + noise_dim
    if model.random_link:  # a random callable g: one draw of g per Monte Carlo node
        if method == "gauss_hermite":
            raise ValueError(
                "the target callable uses its rng (a random g): Gauss-Hermite nodes cannot "
                "integrate it; use method='monte_carlo' or 'auto'"
            )
        method = "monte_carlo"
    if order is None and method != "monte_carlo":
        order = min(MAX_GAUSS_HERMITE_ORDER, int(np.floor(max_nodes ** (1.0 / dim) + 1e-9)))
        if method == "auto":
            method = "gauss_hermite" if order >= MIN_GAUSS_HERMITE_ORDER else "monte_carlo"
    elif method == "auto":
        method = "gauss_hermite"
    gen = None
    if method == "gauss_hermite":
        order = check_positive_int(order, "order", minimum=2)
        if float(order) ** dim > 5e6:
            raise ValueError(
                f"order**dim = {order}**{dim} Gauss-Hermite nodes exceed 5e6; lower order or "
                "use method='monte_carlo'"
            )
        nodes = gauss_hermite(dim, order)
    else:
        gen = np.random.default_rng(rng)
        nodes = monte_carlo(dim, n_mc, gen)
        order = None
    pts = nodes.points
    z, g = pts[:, :k], pts[:, k : k + m]
    y = model.link(z, gen if gen is not None else 0)
    if noise_dim:
        y = y + model.noise * pts[:, k + m]
    const = 0.5 * model.noise**2 if net.loss == "square" else 0.0
    return _RiskNodes(
        z=np.ascontiguousarray(z),
        g=np.ascontiguousarray(g),
        y=y,
        weights=nodes.weights,
        const=const,
        kind=nodes.kind,
        order=order,
    )


def _risk_and_grad(L, M, nodes: _RiskNodes, net: TwoLayerNet, per_node=False):
    """Risk ``E[l(y, f(u))]``, ``u = M z + L g``, and its gradient in ``L`` (lower triangle).

    ``dR/dL_{jk} = E[l'(y, f) a_j sigma'(u_j) g_k]`` (chain rule through ``u = M z + L g``).
    With ``per_node`` also returns the per-node losses (for a Monte Carlo standard error).
    """
    U = nodes.g @ L.T
    if np.any(M):
        U += nodes.z @ M.T
    s, ds, _ = net.sigma(U)
    f = s @ net.a
    ell, dl, _ = net.loss_derivatives(nodes.y, f)
    risk = float(nodes.weights @ ell) + nodes.const
    G = (nodes.weights * dl)[:, None] * ds * net.a[None, :]
    grad = np.tril(G.T @ nodes.g)
    if per_node:
        return risk, grad, ell, U
    return risk, grad


def population_risk(
    model, net, Q, M=None, *, method="auto", order=None, max_nodes=200_000, n_mc=200_000, rng=0
) -> float:
    """Population risk ``R(Q, M) = E[l(y, sum_j a_j sigma(u_j))]`` (docs/theory.md section 6).

    ``z ~ N(0, I_k)``, ``y = g(z) + noise eps`` and ``u = M z + (Q - M M^T)^{1/2} h`` with
    ``h ~ N(0, I_m)`` independent, i.e. the law of ``u = W^T x`` when ``W^T W = Q`` and
    ``W^T Theta* = M``.  Quadrature as in :func:`population_point`.

    Parameters
    ----------
    model : MultiIndexModel
        The target.
    net : TwoLayerNet
        The network.
    Q : array (m, m)
        ``W^T W``; ``Q - M M^T`` must be positive semidefinite.
    M : array (m, k), optional
        ``W^T Theta*`` (default 0).
    method : {"auto", "gauss_hermite", "monte_carlo"}
        Integration rule.
    order, max_nodes, n_mc, rng
        Gauss-Hermite order, node budget, Monte Carlo nodes and their seed.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For shapes that do not match, ``Q - M M^T`` not positive semidefinite, or an unknown
        ``method``.

    Examples
    --------
    A quadratic unit on phase retrieval with square loss and ``M = 0``: ``f = Q h^2`` with
    ``h`` independent of ``z``, so ``R = (3 Q^2 - 2 Q + 3) / 2``, which is 2 at ``Q = 1``:

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> net = rmt.TwoLayerNet(1, activation="quadratic", loss="square", a=[1.0])
    >>> round(rmt.population_risk(model, net, np.eye(1)), 6)
    2.0
    """
    model, net, M = _check_model_net_M(model, net, M)
    Q = _check_Q(Q, net.width)
    L = _psd_factor(Q - M @ M.T, "Q - M M^T")
    method = check_choice(method, "method", ("auto", "gauss_hermite", "monte_carlo"))
    nodes = _risk_nodes(model, net, method, order, max_nodes, n_mc, rng)
    return _risk_and_grad(L, M, nodes, net)[0]


@dataclass(frozen=True, kw_only=True)
class PointSpec:
    """A population point: ``W^T W = Q`` and ``W^T Theta* = M`` (docs/theory.md section 6, point 2).

    Attributes
    ----------
    Q : ndarray (m, m)
        Gram matrix of the first layer at the minimiser, ``Q = M M^T + L L^T``.
    M : ndarray (m, k)
        Fixed overlap with ``Theta*``.
    risk : float
        Population risk at ``Q``.
    converged : bool
        The optimiser reported success and the largest entry of the gradient in ``L`` is
        ``<= gtol`` (L-BFGS-B's own stopping test; ``grad_norm`` is the Frobenius norm).
    grad_norm : float
        Frobenius norm of ``dR/dL`` at the end.
    iterations : int
        Optimiser iterations.
    message : str
        The optimiser's status message.
    risk_error : float
        Quadrature error estimate of ``risk``: the Monte Carlo standard error, or for
        Gauss-Hermite the change when the order is lowered by a quarter.
    quadrature : str
        ``"quadrature"`` (tensor Gauss-Hermite) or ``"monte_carlo"``, and ``order`` its order.
    curvature : ndarray (m, m)
        ``E[D]`` at the point: the population Hessian in directions orthogonal to
        ``span(W, Theta*)`` is ``E[D] (x) I`` (docs/theory.md section 2; ``sigma'' = 0`` for relu).
    """

    Q: np.ndarray
    M: np.ndarray
    risk: float
    converged: bool
    grad_norm: float
    iterations: int
    message: str
    risk_error: float
    quadrature: str
    order: int | None
    curvature: np.ndarray

    def draw(self, d, theta, rng=None) -> np.ndarray:
        """A concrete ``W = Theta* M^T + U (Q - M M^T)^{1/2}`` (``d x m``).

        ``U`` is Haar-random with orthonormal columns orthogonal to ``theta``, so that
        ``W^T theta = M`` and ``W^T W = Q``.  For ``M = 0`` this is ``W = U Q^{1/2}``.
        """
        d = check_positive_int(d, "d")
        m, k = self.M.shape
        theta = as_float_array(theta, "theta")
        if theta.ndim == 1:
            theta = theta[:, None]
        if theta.shape != (d, k):
            raise ValueError(f"theta must have shape (d, k) = ({d}, {k}); got {theta.shape}")
        if not np.allclose(theta.T @ theta, np.eye(k), atol=1e-8):
            raise ValueError("theta must have orthonormal columns (theta^T theta = I)")
        if d < k + m:
            raise ValueError(f"d must be >= k + m = {k + m} to fit W; got d = {d}")
        rng = np.random.default_rng(rng)
        G = rng.standard_normal((d, m))
        G -= theta @ (theta.T @ G)
        U, _ = np.linalg.qr(G)
        U -= theta @ (theta.T @ U)  # re-orthogonalise once against theta (to rounding)
        U, _ = np.linalg.qr(U)
        C = _sym_sqrt(self.Q - self.M @ self.M.T)
        return theta @ self.M.T + U @ C


def population_point(
    model,
    net,
    M=None,
    *,
    method="auto",
    order=None,
    max_nodes=200_000,
    n_mc=200_000,
    rng=0,
    init_scale=0.5,
    L0=None,
    gtol=1e-7,
    maxiter=2000,
) -> PointSpec:
    """Minimise the population risk over ``Q = W^T W`` with ``W^T Theta* = M`` (docs/theory.md §6).

    The risk :func:`population_risk` is integrated over ``(z, h[, eps])`` with tensor
    Gauss-Hermite nodes while ``order**dim <= max_nodes`` allows an order of at least 10
    (``dim = k + m``, plus one for label noise unless the loss is square, where the noise is
    integrated analytically); otherwise with ``n_mc`` Monte Carlo nodes drawn from ``rng``
    (fixed seed 0 by default, so the objective is deterministic).  ``Q - M M^T = L L^T`` with
    ``L`` lower triangular, so ``Q - M M^T >= 0`` holds by construction; L-BFGS-B minimises over
    ``L`` with the analytic gradient.  ``L = 0`` is a critical point when ``M = 0``, so the start
    is ``L0`` (default ``init_scale * I``).

    A callable target ``g(z, rng)`` is integrated the same way: a deterministic ``g`` (one that
    ignores its ``rng``, :attr:`rmt.MultiIndexModel.deterministic`) at the Gauss-Hermite nodes,
    as accurate as a registry target when ``g`` is smooth (``risk_error`` estimates the error;
    a kink or a clip of ``g`` makes Gauss-Hermite converge slowly, pass ``method="monte_carlo"``
    to cross-check); a random ``g`` always with Monte Carlo nodes, one draw of ``g`` per node
    from the same ``rng``, with error ``risk_error`` (the standard error, about
    ``std(l) / sqrt(n_mc)``).

    The minimiser can be ``Q = 0``: e.g. for an odd activation without bias and an even target,
    ``E f = 0`` and the square risk is ``(E f^2 + E y^2)/2``, smallest at ``W = 0``.
    When the risk is flat along a family of minimisers that contains ``W = 0`` (for instance
    ``w_2 = -w_1`` with an odd activation and equal ``a_j``, where ``f = 0`` identically), the
    minimum-norm one is returned: ``Q = M M^T`` whenever the risk there is no larger than at the
    optimiser's answer (to a relative 1e-10).

    Parameters
    ----------
    model : MultiIndexModel
        The target.
    net : TwoLayerNet
        The network (its second layer ``a`` is fixed).
    M : array (m, k), optional
        ``W^T Theta*``, held fixed (default 0).
    method : {"auto", "gauss_hermite", "monte_carlo"}
        Integration rule of the risk.
    order, max_nodes, n_mc, rng
        Gauss-Hermite order, node budget, Monte Carlo nodes and their seed.
    init_scale, L0
        The start of L-BFGS-B: ``L0`` or ``init_scale * I``.
    gtol, maxiter
        L-BFGS-B's gradient tolerance and iteration limit.

    Returns
    -------
    PointSpec
        ``Q``, ``M``, ``risk`` (with its error estimate ``risk_error``), convergence record
        and the curvature there; :meth:`PointSpec.draw` makes a ``W`` of it.

    Raises
    ------
    ValueError
        For an unknown ``method`` or shapes that do not match the network and model.

    Examples
    --------
    For the quadratic unit above the risk is ``(3 Q^2 - 2 Q + 3) / 2``, smallest at
    ``Q = 1/3`` where it is ``4/3``:

    >>> import numpy as np
    >>> import rmt
    >>> model = rmt.MultiIndexModel("phase_retrieval")
    >>> net = rmt.TwoLayerNet(1, activation="quadratic", loss="square", a=[1.0])
    >>> spec = rmt.population_point(model, net)
    >>> spec.converged, round(float(spec.Q[0, 0]), 6), round(spec.risk, 6)
    (True, 0.333333, 1.333333)
    >>> W = spec.draw(200, np.eye(200)[:, :1], rng=0)
    >>> W.shape, round(float(W[:, 0] @ W[:, 0]), 6), abs(float(W[0, 0])) < 1e-12  # W^T e_1 = M
    ((200, 1), 0.333333, True)
    """
    model, net, M = _check_model_net_M(model, net, M)
    method = check_choice(method, "method", ("auto", "gauss_hermite", "monte_carlo"))
    max_nodes = check_positive_int(max_nodes, "max_nodes")
    gtol = check_nonneg_float(gtol, "gtol")
    maxiter = check_positive_int(maxiter, "maxiter")
    m = net.width
    if L0 is None:
        L0 = check_nonneg_float(init_scale, "init_scale") * np.eye(m)
    L0 = as_float_array(L0, "L0", ndim=2)
    if L0.shape != (m, m):
        raise ValueError(f"L0 must have shape (m, m) = ({m}, {m}); got {L0.shape}")
    nodes = _risk_nodes(model, net, method, order, max_nodes, n_mc, rng)
    tri = np.tril_indices(m)

    def fun(x):
        L = np.zeros((m, m))
        L[tri] = x
        risk, grad = _risk_and_grad(L, M, nodes, net)
        return risk, grad[tri]

    res = minimize(
        fun,
        L0[tri],
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "gtol": gtol, "ftol": 1e-15, "maxls": 50},
    )
    L = np.zeros((m, m))
    L[tri] = res.x
    # prefer the minimum-norm minimiser W = 0 when the risk is flat out to the optimiser's answer
    risk0 = _risk_and_grad(np.zeros((m, m)), M, nodes, net)[0]
    if risk0 <= res.fun + 1e-10 * max(1.0, abs(res.fun)):
        L = np.zeros((m, m))
    return _finish_point(L, M, nodes, model, net, res, gtol)


def _finish_point(L, M, nodes, model, net, res, gtol) -> PointSpec:
    """Assemble the :class:`PointSpec`, with the error estimate and ``E[D]`` at the optimum."""
    risk, grad, ell, U = _risk_and_grad(L, M, nodes, net, per_node=True)
    grad_norm = float(np.linalg.norm(grad))
    if nodes.kind == "monte_carlo":
        w = nodes.weights
        err = float(np.sqrt(w @ (ell - (w @ ell)) ** 2 / max(len(w) - 1, 1)))
    else:
        low = max(2, nodes.order - max(1, nodes.order // 4))
        coarse = _risk_nodes(model, net, "gauss_hermite", low, None, None, None)
        err = abs(_risk_and_grad(L, M, coarse, net)[0] - risk)
    D = net.curvature(U, nodes.y)
    curvature = np.tensordot(nodes.weights, D, axes=(0, 0))
    return PointSpec(
        Q=M @ M.T + L @ L.T,
        M=M.copy(),
        risk=risk,
        # the optimiser's own test: the largest entry of the gradient in L (pgtol = gtol)
        converged=bool(res.success) and float(np.max(np.abs(grad), initial=0.0)) <= gtol,
        grad_norm=grad_norm,
        iterations=int(res.nit),
        message=str(res.message),
        risk_error=err,
        quadrature=nodes.kind,
        order=nodes.order,
        curvature=0.5 * (curvature + curvature.T),
    )


def _check_model_net_M(model, net, M):
    if not isinstance(model, MultiIndexModel):
        raise TypeError(f"model must be an rmt.MultiIndexModel; got {type(model).__name__}")
    if not isinstance(net, TwoLayerNet):
        raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
    if net.loss == "logistic" and model.noise > 0:
        raise ValueError("the logistic loss needs labels in {-1, +1}; got a model with noise > 0")
    m, k = net.width, model.k
    M = np.zeros((m, k)) if M is None else as_float_array(M, "M", ndim=2)
    if M.shape != (m, k):
        raise ValueError(f"M must have shape (m, k) = ({m}, {k}); got {M.shape}")
    return model, net, M


def _check_Q(Q, m) -> np.ndarray:
    Q = as_float_array(Q, "Q", ndim=2)
    if Q.shape != (m, m):
        raise ValueError(f"Q must have shape (m, m) = ({m}, {m}); got {Q.shape}")
    if not np.allclose(Q, Q.T, atol=1e-12 * max(1.0, np.abs(Q).max())):
        raise ValueError("Q must be symmetric")
    return 0.5 * (Q + Q.T)


def _sym_sqrt(A) -> np.ndarray:
    """Symmetric PSD square root (eigenvalues below 0 from rounding are set to 0)."""
    vals, vecs = np.linalg.eigh(0.5 * (A + A.T))
    return (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T


def _psd_factor(A, name) -> np.ndarray:
    """A factor ``L`` with ``L L^T = A`` for PSD ``A`` (symmetric square root)."""
    vals = np.linalg.eigvalsh(0.5 * (A + A.T))
    if vals[0] < -1e-10 * max(1.0, abs(vals[-1])):
        raise ValueError(
            f"{name} must be positive semidefinite; its smallest eigenvalue is {vals[0]:.3g}"
        )
    return _sym_sqrt(A)


# ---------------------------------------------------------------------------------------------
# the trained point: full-batch gradient descent with first-phase detection
# ---------------------------------------------------------------------------------------------
def theta_overlap(W, theta) -> float:
    """Fraction of the squared weight norm in ``span(Theta*)``: ``||Theta*^T W||_F^2 / ||W||_F^2``.

    It lies in ``[0, 1]``; a random ``W`` has about ``k/d`` and ``W`` inside ``span(Theta*)`` has 1
    (docs/theory.md section 1.4).

    Examples
    --------
    >>> import numpy as np
    >>> import rmt
    >>> rmt.theta_overlap(np.array([[3.0], [4.0], [0.0]]), np.eye(3)[:, :1])  # 3^2 / 5^2
    0.36
    """
    total = float(np.sum(W * W))
    if total == 0.0:
        return 0.0
    P = theta.T @ W
    return float(np.sum(P * P)) / total


# ---------------------------------------------------------------------------------------------
# points as objects: one subclass per kind, registered in POINT_KINDS
# ---------------------------------------------------------------------------------------------
#: every kind of point by name; :func:`register_point` adds one
POINT_KINDS: dict[str, type] = {}


def register_point(cls):
    """Class decorator: make the :class:`Point` subclass ``cls`` known under ``cls.kind``.

    A new kind of point is one subclass with ``kind``, ``weights`` (and ``law_inputs`` when it
    does not depend on the sample, ``from_config`` when a ``RunConfig`` can name it), registered
    with this decorator; the configuration, the command line and
    :func:`rmt.population_threshold` then accept it.

    Raises
    ------
    TypeError
        When ``cls`` is not a :class:`Point` subclass with a ``kind``.

    Examples
    --------
    A kind of its own, registered under its name (``rmt.RunConfig(point=...)`` then accepts it):

    >>> import rmt
    >>> @rmt.register_point
    ... class DiagonalExample(rmt.GivenPoint):
    ...     kind = "diagonal_example"
    >>> "diagonal_example" in rmt.POINT_KINDS
    True
    >>> del rmt.POINT_KINDS["diagonal_example"]
    """
    if not (isinstance(cls, type) and issubclass(cls, Point)) or not cls.kind:
        raise TypeError(f"a point kind must be a Point subclass with a kind; got {cls!r}")
    POINT_KINDS[cls.kind] = cls
    return cls


def config_point_kinds() -> tuple[str, ...]:
    """The kinds a ``RunConfig`` can name (those that build themselves from a configuration)."""
    return tuple(sorted(k for k, cls in POINT_KINDS.items() if cls.in_config))


class Point:
    """Where the Hessian is studied: the weights ``W`` for a sample, and the law if it is fixed.

    ``kind`` names the point; ``sample_dependent`` is True when ``W`` depends on the sample (then
    there is no Gaussian law of docs/theory.md section 3 to predict with, and :meth:`law_inputs` is
    ``None``).  ``failure`` is empty, or says why the point is not to be trusted.
    """

    kind: ClassVar[str] = ""
    sample_dependent: ClassVar[bool] = False
    in_config: ClassVar[bool] = True

    @classmethod
    def from_config(cls, config, model, net) -> Point:
        """The point of this kind for a ``RunConfig`` (with its model and network)."""
        raise ValueError(f"a {cls.kind} point cannot be built from a configuration")

    def weights(self, net, data, rng) -> np.ndarray:
        """``W`` (``d x m``) for the sample ``data``, drawing what it needs from ``rng``."""
        raise NotImplementedError

    def realize(self, net, data, rng) -> tuple:
        """``(W, record)``: the weights and what producing them recorded (``None`` here)."""
        return self.weights(net, data, rng), None

    def law_inputs(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(Q, M) = (W^T W, W^T Theta*)`` of the Gaussian law (docs/theory.md section 3), or
        ``None`` when ``W`` depends on the sample."""
        return None

    @property
    def failure(self) -> str:
        return ""

    def describe(self) -> dict:
        """A JSON-able description, for manifests."""
        return {"kind": self.kind}


@register_point
@dataclass(frozen=True)
class PopulationPoint(Point):
    """The population point ``spec`` (:func:`population_point`); ``W = spec.draw(d, theta)``."""

    spec: PointSpec
    kind: ClassVar[str] = "population"

    def __post_init__(self):
        if not isinstance(self.spec, PointSpec):
            raise TypeError(f"spec must be an rmt.PointSpec; got {type(self.spec).__name__}")

    @classmethod
    def from_config(cls, config, model, net) -> PopulationPoint:
        return cls.from_model(model, net)

    @classmethod
    def from_model(cls, model, net) -> PopulationPoint:
        return cls(population_point(model, net))

    def weights(self, net, data, rng) -> np.ndarray:
        return self.spec.draw(data.d, data.theta, rng)

    def law_inputs(self):
        return self.spec.Q, self.spec.M

    @property
    def failure(self) -> str:
        if self.spec.converged:
            return ""
        return f"the population point did not converge: {self.spec.message}"

    def describe(self) -> dict:
        s = self.spec
        return {
            "kind": self.kind,
            "Q": s.Q,
            "M": s.M,
            "risk": s.risk,
            "converged": s.converged,
            "grad_norm": s.grad_norm,
        }


@register_point
@dataclass(frozen=True)
class ZeroPoint(Point):
    """``W = 0`` for a network of ``width`` hidden units and a target of ``k`` directions."""

    width: int
    k: int
    kind: ClassVar[str] = "zero"

    def __post_init__(self):
        check_positive_int(self.width, "width")
        check_positive_int(self.k, "k")

    @classmethod
    def from_config(cls, config, model, net) -> ZeroPoint:
        return cls(net.width, model.k)

    def weights(self, net, data, rng) -> np.ndarray:
        if net.width != self.width:
            raise ValueError(f"net.width must be {self.width} at this point; got {net.width}")
        return np.zeros((data.d, self.width))

    def law_inputs(self):
        return np.zeros((self.width, self.width)), np.zeros((self.width, self.k))


@register_point
@dataclass(frozen=True, eq=False)
class GivenPoint(Point):
    """A user-given ``W`` (``d x m``), the same for every sample.

    With ``theta`` (``d x k``, the ``Theta*`` of the data the point is used with) the law inputs
    are ``(W^T W, W^T theta)``; without it :meth:`law_inputs` is ``None``.
    """

    W: np.ndarray
    theta: np.ndarray | None = None
    kind: ClassVar[str] = "given"
    in_config: ClassVar[bool] = False

    def __post_init__(self):
        W = as_float_array(self.W, "W", ndim=2)
        object.__setattr__(self, "W", W)
        if self.theta is not None:
            theta = as_float_array(self.theta, "theta")
            theta = theta[:, None] if theta.ndim == 1 else theta
            if theta.ndim != 2 or theta.shape[0] != W.shape[0]:
                raise ValueError(f"theta must have {W.shape[0]} rows like W; got {theta.shape}")
            object.__setattr__(self, "theta", theta)

    def weights(self, net, data, rng) -> np.ndarray:
        return net.check_weights(self.W, data.d)

    def law_inputs(self):
        if self.theta is None:
            return None
        return self.W.T @ self.W, self.W.T @ self.theta


@register_point
@dataclass(frozen=True, kw_only=True)
class TrainedPoint(Point):
    """The end of the first phase of full-batch gradient descent from a small random start.

    :meth:`train` runs :func:`rmt.gradient_descent` with these settings; ``W`` is the iterate
    at the plateau of :func:`rmt.dynamics.descent.segment_phases` (docs/theory.md section 7.2).
    """

    lr: float = 0.5
    steps: int = 3000
    weight_decay: float = 0.0
    init_scale: float = 1e-2
    continue_steps: int = 0
    progress: bool = False
    kind: ClassVar[str] = "trained"
    sample_dependent: ClassVar[bool] = True

    def __post_init__(self):
        if check_nonneg_float(self.lr, "lr") == 0:
            raise ValueError(f"lr must be > 0; got {self.lr!r}")
        check_positive_int(self.steps, "steps")
        check_nonneg_float(self.weight_decay, "weight_decay")
        check_nonneg_float(self.init_scale, "init_scale")
        check_positive_int(self.continue_steps, "continue_steps", minimum=0)

    @classmethod
    def from_config(cls, config, model, net) -> TrainedPoint:
        return cls(
            lr=config.lr,
            steps=config.train_steps,
            weight_decay=config.weight_decay,
            init_scale=config.init_scale,
        )

    def train(self, net, data, rng, test=None):
        """Gradient descent on ``data`` from ``rng`` (:func:`rmt.gradient_descent`).

        Without ``continue_steps`` it stops once the plateau is confirmed; otherwise it runs
        ``steps + continue_steps`` steps (with ``test`` as the held-out set) to see the escape.
        """
        return gradient_descent(
            net,
            data,
            test=test,
            init_scale=self.init_scale,
            lr=self.lr,
            steps=self.steps + self.continue_steps,
            weight_decay=self.weight_decay,
            stop_at_plateau=self.continue_steps == 0,
            rng=rng,
            progress=self.progress,
        )

    def weights(self, net, data, rng) -> np.ndarray:
        return self.realize(net, data, rng)[0]

    def realize(self, net, data, rng) -> tuple:
        """``(W1, run)``: the plateau iterate, or the last one when no plateau was detected
        (``run.phases.detected`` is then False)."""
        run = self.train(net, data, rng)
        return (run.W1 if run.W1 is not None else run.W_final), run

    def describe(self) -> dict:
        keys = ("lr", "steps", "weight_decay", "init_scale")
        return {"kind": self.kind, **{k: getattr(self, k) for k in keys}}


def make_point(config, model=None, net=None) -> Point:
    """The point a ``RunConfig`` names (``config.point``), for its model and network.

    See docs/theory.md section 6.2 (the points the toolkit supports).

    Parameters
    ----------
    config : RunConfig
        Names the point (``config.point``, a kind of :data:`POINT_KINDS`) and its settings.
    model : MultiIndexModel, optional
        Default ``config.model()``.
    net : TwoLayerNet, optional
        Default ``config.net()``.

    Returns
    -------
    Point

    Raises
    ------
    ValueError
        For a kind that is unknown or cannot be built from a configuration.

    Examples
    --------
    >>> import numpy as np
    >>> import rmt
    >>> point = rmt.make_point(rmt.RunConfig(point="zero", width=2))
    >>> point
    ZeroPoint(width=2, k=1)
    >>> Q, M = point.law_inputs()
    >>> Q.shape, M.shape, bool(np.all(Q == 0) and np.all(M == 0))
    ((2, 2), (2, 1), True)
    """
    cls = POINT_KINDS.get(config.point)
    if cls is None or not cls.in_config:
        known = ", ".join(config_point_kinds())
        raise ValueError(f"unknown point {config.point!r}; known: {known}")
    model = config.model() if model is None else model
    net = config.net() if net is None else net
    return cls.from_config(config, model, net)


def as_point(point, model, net) -> Point:
    """A :class:`Point` from a Point, a :class:`PointSpec`, or ``"population"`` / ``"zero"``."""
    if isinstance(point, Point):
        return point
    if isinstance(point, PointSpec):
        return PopulationPoint(point)
    if point == "population":
        return PopulationPoint.from_model(model, net)
    if point == "zero":
        return ZeroPoint(net.width, model.k)
    raise ValueError(f"point must be a Point, a PointSpec, 'population' or 'zero'; got {point!r}")
