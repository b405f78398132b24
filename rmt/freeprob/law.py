"""The law of a spiked kernel ensemble: weighted nodes of ``(zhat, D)`` (docs/theory.md sections 3-4).

``H = (1/n) sum_i D_i (x) x_i x_i^T + shift * I`` with ``zhat_i = B^T x_i`` and ``D_i`` a function
of ``zhat_i`` and label noise.  The first ``theta_dims`` coordinates of ``zhat`` span ``Theta*``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfinv

from rmt.freeprob.nodes import (
    ALIGNED_OUTER_RANGE,
    ALIGNED_RANGE,
    DEFAULT_MC_SEED,
    adaptive_2d,
    adaptive_gauss_1d,
    aligned_nodes,
    gaussian_nodes,
    inner_kink_counts,
    nested_nodes,
    random_kind,
)
from rmt.freeprob.unbounded import probe_law
from rmt.kernels.curvature import block_eigenvalues
from rmt.kernels.threads import with_single_threaded_blas
from rmt.problem.models import MultiIndexModel
from rmt.problem.network import TwoLayerNet
from rmt.problem.quadrature import QMC_NODES
from rmt.validation import as_float_array, check_nonneg_float, check_positive_int

#: default outer Gauss-Hermite orders of ``"nested"`` nodes, by the number of outer coordinates;
#: with one, the order grows with the variance ``s2`` of ``u`` along it (``60 s2``, at most 720):
#: the features of ``D`` sit at a scale ``~ 1/sqrt(s2)`` there (docs/theory.md section 3.9)
NESTED_OUTER_ORDER = {1: 240, 2: 16}
NESTED_MAX_ORDER = 720


class SpikeLaw:
    """Joint law of the spike coordinates ``zhat`` (``N x K``) and curvature blocks ``D`` (``N x m x m``).

    Parameters
    ----------
    zhat : array (N, K)
        Spike coordinates at the nodes; the first ``theta_dims`` columns are ``Theta*^T x``.
    D : array (N, m, m) or (N,)
        Symmetric curvature blocks (a 1-D array means ``m = 1``).
    weights : array (N,), optional
        Nonnegative weights summing to one (default uniform).
    theta_dims : int, optional
        Number of ``Theta*`` coordinates (default ``K``).
    shift : float
        ``lambda_wd``: the whole spectrum is shifted by it.
    unbounded : (bool, bool)
        Whether the true (not the discretised) ``D`` is unbounded below / above.  Then the bulk is
        unbounded on that side and no outlier separates there (docs/theory.md section 4).
    d_bounds : (float, float), optional
        For ``m = 1``, the exact essential infimum and supremum of ``D``, when the nodes do not
        reach them (a supremum attained only as ``y -> inf``).  The real branch is then cut there.
    kind : str
        ``"quadrature"``, ``"adaptive"``, ``"monte_carlo"`` or ``"empirical"``.
    stderr : float, optional
        For Monte Carlo nodes, the largest standard error of the entries of ``E[D]`` and
        ``E[zhat zhat^T (x) D]``: an estimate of the discretisation error of the law.

    Raises
    ------
    ValueError
        For inconsistent shapes, non-symmetric ``D_i``, weights that are negative or do not sum
        to one, ``theta_dims > K``, or ``d_bounds`` that do not contain the nodes.

    Examples
    --------
    One node with ``D = 1`` is the law of ``(1/n) X^T X``, Marchenko-Pastur (docs/theory.md
    section 3.5):

    >>> import numpy as np
    >>> import rmt
    >>> law = rmt.SpikeLaw(np.zeros(1), np.ones(1))
    >>> law
    SpikeLaw(N=1, K=1, m=1, theta_dims=1, kind='custom', unbounded=(False, False))
    >>> float(law.expect(law.D)[0, 0])
    1.0
    """

    def __init__(
        self,
        zhat,
        D,
        weights=None,
        theta_dims=None,
        *,
        shift=0.0,
        unbounded=(False, False),
        d_bounds=None,
        kind="custom",
        stderr=None,
        unbounded_reason="",
        far_range=None,
    ):
        zhat = as_float_array(zhat, "zhat")
        zhat = zhat[:, None] if zhat.ndim == 1 else zhat
        D = as_float_array(D, "D")
        D = D[:, None, None] if D.ndim == 1 else D
        if zhat.ndim != 2 or D.ndim != 3 or D.shape[1] != D.shape[2]:
            raise ValueError(f"zhat must be (N, K) and D (N, m, m); got {zhat.shape}, {D.shape}")
        if D.shape[0] != zhat.shape[0]:
            raise ValueError(f"zhat and D need the same N; got {zhat.shape[0]} and {D.shape[0]}")
        Dt = np.swapaxes(D, 1, 2)  # np.allclose(D, Dt, rtol=1e-12, atol=1e-14), D is finite
        if not np.all(np.abs(D - Dt) <= 1e-14 + 1e-12 * np.abs(Dt)):
            raise ValueError("every D_i must be symmetric")
        N = zhat.shape[0]
        w = np.full(N, 1.0 / N) if weights is None else as_float_array(weights, "weights", ndim=1)
        if w.shape[0] != N or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-10:
            raise ValueError("weights must be N nonnegative numbers summing to one")
        K = zhat.shape[1]
        theta_dims = K if theta_dims is None else check_positive_int(theta_dims, "theta_dims", 0)
        if theta_dims > K:
            raise ValueError(f"theta_dims must be <= K = {K}; got {theta_dims}")
        self.zhat, self.D, self.weights, self.theta_dims = zhat, D, w, theta_dims
        self.shift = check_nonneg_float(shift, "shift")
        self.unbounded = (bool(unbounded[0]), bool(unbounded[1]))
        self.unbounded_reason = unbounded_reason
        #: extreme eigenvalues ``(min, max)`` of the exact map D far from the origin (given by
        #: the constructors that have the map; None otherwise): whether the extreme node
        #: reaches them
        self.far_range = None if far_range is None else (float(far_range[0]), float(far_range[1]))
        self.d_bounds = self._check_bounds(d_bounds)
        self.kind, self.stderr = kind, stderr
        eig = node_eigenvalues(D)
        #: a robust size of D (weighted median of ||D_i|| over the nonzero mass), for tolerances
        self.scale = robust_scale(np.max(np.abs(eig), axis=1), w)
        self.node_range = (float(eig.min()), float(eig.max()))
        self.expected_rank = float(w @ np.sum(np.abs(eig) > 1e-12 * self.scale, axis=1))
        #: the dimension of the span of the ranges of all D_i: below m, every H built from the
        #: law vanishes on (its complement) x R^d, an atom at 0 of mass at least 1 - rank / m
        #: at every delta (e.g. D_i all multiples of one a a^T, at W = 0)
        self.common_rank = _common_rank(D, w, self.scale)
        self._flag_extreme_nodes()

    def _flag_extreme_nodes(self):
        """Nodes beyond ``1e6`` times the typical size mean a singular ``D`` (e.g. ``1/y``)."""
        for idx, value in enumerate(self.node_range):
            if (
                not self.unbounded[idx]
                and abs(value) > 1e6 * self.scale
                and np.sign(value) == (-1, 1)[idx]
            ):
                flags = list(self.unbounded)
                flags[idx] = True
                self.unbounded = tuple(flags)
                self.unbounded_reason += (
                    f"; node value {value:.3g} exceeds 1e6 times the typical "
                    f"size {self.scale:.3g} of D"
                )

    def _check_bounds(self, d_bounds):
        if d_bounds is None:
            return None
        if self.m != 1:
            raise ValueError("d_bounds is supported for m = 1 only")
        lo, hi = float(d_bounds[0]), float(d_bounds[1])
        dmin, dmax = self.D.min(), self.D.max()
        if not (lo <= dmin and hi >= dmax):
            raise ValueError(f"d_bounds {d_bounds} must contain the node range [{dmin}, {dmax}]")
        return lo, hi

    N = property(lambda self: self.zhat.shape[0])
    K = property(lambda self: self.zhat.shape[1])
    m = property(lambda self: self.D.shape[1])

    def __repr__(self):
        return (
            f"SpikeLaw(N={self.N}, K={self.K}, m={self.m}, theta_dims={self.theta_dims}, "
            f"kind={self.kind!r}, unbounded={self.unbounded})"
        )

    def expect(self, values):
        """Weighted mean over the nodes (first axis of ``values``)."""
        return np.tensordot(self.weights, values, axes=(0, 0))

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    @with_single_threaded_blas
    def from_network(
        cls,
        model,
        net,
        Q,
        M=None,
        nodes="auto",
        order=None,
        n_mc=None,
        rng=None,
        weight_decay=0.0,
        n_qmc=QMC_NODES,
    ):
        """Gaussian law of ``(zhat, D)`` for the Hessian at a data-independent ``W``.

        ``Q = W^T W`` (``m x m``) and ``M = W^T Theta*`` (``m x k``, default 0) fix the law:
        ``u = W^T x = M z + C^T zperp`` with ``C^T C = Q - M M^T`` (docs/theory.md section 3).
        ``nodes="auto"`` picks:

        - ``"aligned"`` for a noiseless single-index target, a Huber loss or a ReLU activation,
          one unit (``m = 1``) with a monotone activation and one coordinate ``t`` besides
          ``Theta*``: at each ``z`` along ``Theta*`` (an adaptive Gauss-Legendre rule), the
          kinks of ``D`` along ``t`` are located (``TwoLayerNet.kinks``) and made edges of
          Gauss-Legendre panels (``rmt.freeprob.nodes.aligned_nodes``), so the inner
          integrals are spectrally accurate with fewer nodes than ``"nested"`` (its accuracy:
          docs/theory.md section 3.9);
        - ``"nested"`` for the other noiseless single-index targets with a Huber loss or a ReLU
          activation and one coordinate besides ``Theta*``: Gauss-Hermite of order ``order``
          there (default ``60 s2`` within ``[240, 720]``, ``s2`` the variance of ``u`` along
          it), adaptive Gauss-Legendre along ``Theta*`` that resolves the jumps of ``l''`` and
          ``sigma'``.  The inner integrals have square-root singularities in the outer
          coordinate, so the accuracy is algebraic, not spectral (docs/theory.md section
          3.9).  With two outer coordinates the nested rule (order 16) is exact at some
          points and far off at others: ``"auto"`` builds it
          and a ``"qmc"`` law, and keeps the nested one only when its ``E[D]`` and
          ``E[z^2 D]`` lie within 3 standard errors of the ``"qmc"`` ones; where the number of
          kinks along ``Theta*`` varies between outer nodes (a fold) it builds only the
          latter.  Noisy or ``k >= 2`` targets with a non-smooth network get ``"qmc"`` nodes.
        - ``"adaptive"`` (explicit, two integration dimensions): two-level adaptive rule, exact
          across kinks to its tolerance ``1e-10`` but slow;
        - ``"quadrature"``: tensor Gauss-Hermite when ``K`` plus a noise coordinate is at most 3;
        - ``"qmc"`` otherwise: ``n_qmc`` randomised quasi-Monte Carlo nodes (8 independently
          scrambled Sobol sets, ``rmt.problem.quadrature.sobol``), ``stderr`` from the spread of the
          sets; more accurate than i.i.d. draws at fewer nodes (docs/theory.md section 3.9);
        - ``"monte_carlo"``: ``n_mc`` i.i.d. draws (default 200k), ``stderr`` set.  An ``n_mc``
          given with ``nodes="auto"`` asks for these in place of ``"qmc"``.
        The ``"qmc"`` and ``"monte_carlo"`` draws come from ``rng``; ``rng=None`` is the fixed
        seed ``rmt.freeprob.nodes.DEFAULT_MC_SEED``, so the law and its edges are the same on
        every call.

        A callable target ``g(z, rng)`` is evaluated at the nodes like a registry link when it
        ignores its ``rng`` (same rules and accuracy).  One that uses it (a random ``g``) gets
        ``"monte_carlo"`` nodes, one draw of ``g`` per node from a generator spawned from
        ``rng`` (``stderr`` set); any other explicit ``nodes`` raises.
        """
        if not isinstance(model, MultiIndexModel):
            raise TypeError(f"model must be an rmt.MultiIndexModel; got {type(model).__name__}")
        if not isinstance(net, TwoLayerNet):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        k, m = model.k, net.width
        Q = as_float_array(Q, "Q", ndim=2)
        M = np.zeros((m, k)) if M is None else as_float_array(M, "M", ndim=2)
        if Q.shape != (m, m) or M.shape != (m, k):
            raise ValueError(f"Q must be ({m}, {m}) and M ({m}, {k}); got {Q.shape}, {M.shape}")
        C = _perp_factor(Q, M)
        K = k + C.shape[0]
        dims = K + (1 if model.noise > 0 else 0)

        # a callable g(z, rng) that uses its rng: one draw of g per Monte Carlo node
        nodes, g_rng = _random_link_nodes(model, nodes, rng)

        def preactivations(pts):  # u = M z + C^T zperp
            return pts[:, :k] @ M.T + pts[:, k:K] @ C

        def curvature(pts):
            y = model.link(pts[:, :k], g_rng)
            y = y + (model.noise * pts[:, K] if model.noise > 0 else 0.0)
            return net.curvature(preactivations(pts), y)

        def kinks(pts):  # noiseless single-index here (the nested rules)
            return net.kinks(preactivations(pts), model.link(pts[:, :k], g_rng))

        nodes = _network_nodes(nodes, model, net, dims, n_mc)
        if nodes == "nested" and order is None and dims == 2:
            order = _nested_order(C)
        if nodes == "nested_or_random":
            g, D = _nested_checked(curvature, kinks, dims, n_mc, n_qmc, rng)
        elif nodes == "aligned":
            c = float(np.sqrt(np.max(C * C, initial=0.0)))
            sep = _kink_separation(net, c, float(np.max(np.abs(M), initial=0.0)))
            roots = _kink_positions(net, float(M[0, 0]), float(C[0, 0]), model, g_rng)
            g = aligned_nodes(curvature, kinks, c, separation=sep, find_zeros=roots)
            D = curvature(g.points)
        else:
            g = _nodes_for(curvature, dims, nodes, order, n_mc, rng, n_qmc)
            D = curvature(g.points)
        unb, reason, far_range = probe_law(curvature, dims)
        return cls(
            g.points[:, :K],
            D,
            g.weights,
            k,
            shift=weight_decay,
            unbounded=unb,
            kind=g.kind,
            stderr=_mc_stderr(g, D),
            unbounded_reason=reason,
            far_range=far_range,
        )

    @classmethod
    def from_hessian(cls, hessian, theta):
        """Plug-in (empirical) law of the sample behind a first-layer Hessian.

        ``hessian`` is any object with the attributes of ``rmt.Hessian`` that this needs:
        ``data.X`` (``n x d`` array: an ndarray or a memmap), ``D`` (``n x m x m``), ``W``
        (``d x m``) and ``weight_decay`` (``rmt.StreamingHessian`` and ``rmt.DistributedHessian``
        have them too).  It calls :meth:`from_sample`; the weight decay becomes ``shift``.
        """
        try:
            X, D, W, shift = hessian.data.X, hessian.D, hessian.W, hessian.weight_decay
        except AttributeError as exc:
            raise TypeError(
                "hessian must have the attributes data.X, D, W and weight_decay (an rmt.Hessian); "
                f"got {type(hessian).__name__}"
            ) from exc
        return cls.from_sample(X, D, W, theta, shift=shift)

    @classmethod
    def from_sample(cls, X, D, W, theta, shift=0.0):
        """Plug-in (empirical) law of a concrete sample: ``zhat_i = B^T x_i`` with its ``D_i``.

        ``X`` (``n x d``, an ndarray or memmap, read once), ``D`` (``n x m x m``, the curvature
        blocks at ``W``), ``W`` (``d x m``), ``theta`` (``d x k``, orthonormal columns).  ``B`` is
        an orthonormal basis of ``span(theta, W)`` whose first columns are ``theta``.
        """
        X = np.asarray(X)
        if X.ndim != 2 or np.dtype(X.dtype).kind not in "fiu":
            raise ValueError(f"X must be a real 2-d array; got shape {X.shape}, dtype {X.dtype}")
        d = X.shape[1]
        W = as_float_array(W, "W", ndim=2)
        if W.shape[0] != d:
            raise ValueError(f"W must have shape (d={d}, m); got {W.shape}")
        theta = as_float_array(theta, "theta")
        theta = theta[:, None] if theta.ndim == 1 else theta
        if theta.shape[0] != d or not np.allclose(
            theta.T @ theta, np.eye(theta.shape[1]), atol=1e-8
        ):
            raise ValueError(f"theta must be (d={d}, k) with orthonormal columns")
        Wp = W - theta @ (theta.T @ W)
        U, s, _ = np.linalg.svd(Wp, full_matrices=False)
        keep = s > 1e-10 * max(1.0, s.max(initial=0.0))
        B = np.concatenate([theta, U[:, keep]], axis=1)
        zhat = as_float_array(X @ B, "zhat = X B")
        return cls(
            zhat,
            D,
            None,
            theta.shape[1],
            shift=shift,
            kind="empirical",
            unbounded_reason="empirical law: boundedness not assessed",
        )

    @classmethod
    def spectral(
        cls,
        model,
        T,
        nodes="auto",
        order=None,
        n_mc=None,
        rng=None,
        T_bounds=None,
        n_qmc=QMC_NODES,
    ):
        """Law of the spectral estimator ``(1/n) sum_i T(y_i) x_i x_i^T`` (``m = 1``, ``K = k``).

        For a noiseless ``k = 1`` model, ``nodes="auto"`` uses ``adaptive_gauss_1d``, accurate
        across kinks and jumps of ``T(g(z))``.  ``T_bounds = (inf T, sup T)`` gives the exact range
        of ``T`` over the support of ``y`` (use ``inf`` for an unbounded side); it is needed
        when a supremum is reached only as ``y -> inf`` (docs/theory.md section 4, threshold ``c/2``).
        Otherwise the nodes are chosen as in :func:`rmt.freeprob.nodes.gaussian_nodes`
        (``"qmc"`` above three dimensions); random nodes are drawn from ``rng`` (``None``: the
        fixed ``DEFAULT_MC_SEED``).
        A callable target ``g(z, rng)`` is handled as in :meth:`from_network`: evaluated at the
        nodes when it ignores its ``rng``, one draw per Monte Carlo node when it uses it.
        """
        if not isinstance(model, MultiIndexModel):
            raise TypeError(f"model must be an rmt.MultiIndexModel; got {type(model).__name__}")
        if not callable(T):
            raise TypeError(f"T must be a callable y -> T(y); got {type(T).__name__}")
        k = model.k
        dims = k + (1 if model.noise > 0 else 0)
        nodes, g_rng = _random_link_nodes(model, nodes, rng)

        def preprocess(pts):
            y = model.link(pts[:, :k], g_rng)
            y = y + (model.noise * pts[:, k] if model.noise > 0 else 0.0)
            return as_float_array(T(y), "T(y)", ndim=1)[:, None, None]

        g = _nodes_for(preprocess, dims, nodes, order, n_mc, rng, n_qmc)
        D = preprocess(g.points)
        far_range = None
        if T_bounds is None:
            unb, reason, far_range = probe_law(preprocess, dims)
            d_bounds = None
        else:
            lo, hi = float(T_bounds[0]), float(T_bounds[1])
            unb = (lo == -np.inf, hi == np.inf)
            reason = f"T_bounds = ({lo}, {hi}) given by the caller"
            d_bounds = (lo, hi)
        return cls(
            g.points[:, :k],
            D,
            g.weights,
            k,
            unbounded=unb,
            d_bounds=d_bounds,
            kind=g.kind,
            stderr=_mc_stderr(g, D),
            unbounded_reason=reason,
            far_range=far_range,
        )


def robust_scale(sizes, weights):
    """Weighted median of the node sizes ``||D_i||`` over the mass where ``D_i != 0``.

    An atom of ``D`` at 0 (trimmed spectral methods ``T(y) = 1{y > t}``, ReLU's ``sigma' = 0``)
    carries no size: a median over all the mass would be 0 once the atom holds half of it, and
    every nonzero node would look singular.  The median of the rest is still not moved by a
    heavy tail.  Returns ``1e-300`` when ``D = 0`` everywhere."""
    nonzero = sizes > 0.0
    if not np.any(nonzero) or weights[nonzero].sum() <= 0.0:
        return 1e-300
    s, w = sizes[nonzero], weights[nonzero]
    order = np.argsort(s)
    cum = np.cumsum(w[order])
    median = s[order][min(np.searchsorted(cum, 0.5 * cum[-1]), s.size - 1)]
    return float(max(median, 1e-300))


def node_eigenvalues(D):
    """Eigenvalues (ascending) of every symmetric ``D_i``; closed form for ``m <= 2``, cyclic
    Jacobi on the threads for ``m >= 3`` (``block_eigenvalues``, as accurate as ``eigvalsh``;
    its speed: benchmarks/RESULTS.md).

    For ``m = 2`` the eigenvalue of larger magnitude is ``mean + sign(mean) * radius`` (no
    cancellation) and the other is ``det / big``: both to ``eps * |D_i|``, as LAPACK's."""
    m = D.shape[1]
    if m == 1:
        return D[:, :, 0].copy()
    if m != 2:
        out = np.empty(D.shape[:2])
        block_eigenvalues(np.ascontiguousarray(D, dtype=np.float64), out)
        return out
    a, b, c = D[:, 0, 0], D[:, 0, 1], D[:, 1, 1]
    mean = 0.5 * (a + c)
    big = mean + np.copysign(np.hypot(0.5 * (a - c), b), mean)
    det = a * c - b * b
    small = np.divide(det, big, out=np.zeros_like(det), where=big != 0.0)
    return np.sort(np.stack([small, big], axis=1), axis=1)


def _random_link_nodes(model, nodes, rng):
    """``(nodes, rng for g)``: Monte Carlo nodes, and a generator independent of the nodes', for
    a callable target that uses its ``rng``; otherwise ``nodes`` unchanged (and ``g``'s rng 0)."""
    if not model.random_link:
        return nodes, 0
    if nodes not in ("auto", "monte_carlo"):
        raise ValueError(
            f"the target callable uses its rng (a random g): nodes={nodes!r} cannot integrate "
            "it; use 'monte_carlo' or 'auto'"
        )
    if isinstance(rng, np.random.Generator):
        return "monte_carlo", rng.spawn(1)[0]

    seed = DEFAULT_MC_SEED if rng is None else rng
    return "monte_carlo", np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])


def _non_smooth(net):
    """Huber's ``l''`` jumps and ReLU's ``sigma'`` jumps: plain Gauss-Hermite loses percents."""
    return net.loss == "huber" or net.activation == "relu"


#: activations along which ``|f(u) - y| = huber_delta`` has at most one zero per sign for one
#: unit: the two Huber kinks stay ``2 huber_delta`` apart in ``f`` (``aligned_nodes``'s grid)
MONOTONE = ("tanh", "cubic", "softplus", "erf", "relu")


#: ``sup sigma'`` of the monotone activations whose slope is bounded
SUP_SLOPE = {"tanh": 1.0, "softplus": 1.0, "erf": 2.0 / np.sqrt(np.pi), "relu": 1.0}


def _kink_separation(net, c, m_abs=0.0):
    """For one unit, ``u = M z + c t`` (``m_abs = |M|``): a lower bound on the distance along
    ``t`` between two zeros of one column of ``TwoLayerNet.kinks`` (``None`` if unknown).
    Huber's two zeros lie where ``a sigma(u) = y -+ huber_delta``, so at least ``2 huber_delta
    / (|a| c sup sigma')`` apart, the supremum over the ``u`` the aligned rule reaches (for the
    cubic unit ``3 u^2`` at ``|u| = 8 |M| + 7.5 c``, so that no two kinks at large ``|z|`` fall
    within one grid step); ReLU's column ``u`` has one zero."""
    if c <= 0.0:
        return None
    if net.loss != "huber":
        return np.inf if net.activation == "relu" else None
    slope = SUP_SLOPE.get(net.activation)
    if net.activation == "cubic":
        reach = ALIGNED_OUTER_RANGE * m_abs + ALIGNED_RANGE * c
        slope = 3.0 * reach * reach
    if slope is None or net.a[0] == 0.0:
        return None
    return 2.0 * net.huber_delta / (abs(float(net.a[0])) * c * slope)


def inverse_activation(name, v):
    """``sigma^{-1}(v)`` of a monotone activation (``MONOTONE``), ``nan`` where ``v`` is outside
    the range of ``sigma`` (for ReLU, ``v <= 0``: no single preimage)."""
    v = np.asarray(v, dtype=float)
    with np.errstate(all="ignore"):
        if name == "tanh":
            return np.where(np.abs(v) < 1.0, np.arctanh(v), np.nan)
        if name == "erf":
            return np.where(np.abs(v) < 1.0, erfinv(v), np.nan)
        if name == "cubic":
            return np.cbrt(v)
        if name == "softplus":  # log(e^v - 1), without overflow
            return np.where(v > 0.0, v + np.log(-np.expm1(-v)), np.nan)
        if name == "relu":
            return np.where(v > 0.0, v, np.nan)
    raise ValueError(f"no inverse for the activation {name!r}")


def _kink_positions(net, m0, c0, model, g_rng):
    """The zeros of the kink functions of one unit along the second coordinate ``t``, in closed
    form (``aligned_nodes``'s ``find_zeros``): with ``u = m0 z + c0 t`` and ``y = g(z)``, Huber's
    ``|a sigma(u) - y| = huber_delta`` at ``u = sigma^{-1}((y -+ huber_delta) / a)`` and ReLU's
    ``u = 0``.  Returns ``roots(z) -> (owner, t)`` for the ``t`` inside the aligned range, or
    ``None`` where the grid search must do it (no Huber loss and no ReLU, ``a = 0``, ``c0 = 0``).
    ``sigma`` is strictly monotone, so each is a crossing (a sign change), the zeros the grid
    search brackets and narrows; unlike it, two zeros within one grid step are both found."""
    a = float(net.a[0])
    huber = net.loss == "huber"
    if c0 == 0.0 or not (huber or net.activation == "relu") or (huber and a == 0.0):
        return None

    def roots(z):
        y = np.asarray(model.link(z[:, None], g_rng), dtype=float).reshape(-1)
        cols = []
        if huber:
            for sgn in (-1.0, 1.0):
                cols.append(inverse_activation(net.activation, (y + sgn * net.huber_delta) / a))
        if net.activation == "relu":
            cols.append(np.zeros_like(z))
        u = np.stack(cols, axis=1)
        t = (u - m0 * z[:, None]) / c0
        owner, col = np.nonzero(np.abs(t) < ALIGNED_RANGE)  # nan compares False
        return owner, t[owner, col]

    return roots


def _network_nodes(nodes, model, net, dims, n_mc=None):
    """The rule ``nodes="auto"`` means for a network law (docs/theory.md section 3.9).

    A non-smooth network gets ``"aligned"`` nodes for a noiseless single-index target and one
    unit with a monotone activation at a point with one coordinate besides ``Theta*`` (every
    kink then sits at a zero along that coordinate, found and made a panel edge), and
    ``"nested"`` nodes for the other noiseless single-index laws (every kink lies along
    ``Theta*``).  Label noise moves the kinks of ``l''`` (at ``f(u) - g(z) -
    noise * eps = +-huber_delta``) off that axis, and a ``k >= 2`` target has kinks in several
    coordinates, which Gauss-Hermite does not resolve, so those laws get randomised QMC nodes
    (``"qmc"``) with their
    ``stderr``; so do noiseless laws with two coordinates besides ``Theta*`` (``m >= 2`` at a
    generic point).
    """
    nestable = model.k == 1 and model.noise == 0 and 2 <= dims <= 3
    alignable = nestable and dims == 2 and net.width == 1 and net.activation in MONOTONE
    if nodes == "aligned" and not alignable:
        raise ValueError(
            "aligned nodes need a noiseless single-index target, one unit with a monotone "
            f"activation and two integration dimensions (k = {model.k}, noise = {model.noise}, "
            f"width = {net.width}, activation = {net.activation!r}, {dims} dimensions); use "
            "nodes='nested' or 'qmc'"
        )
    if not _non_smooth(net) or dims == 1:
        return nodes  # one dimension: "auto" is the adaptive rule, exact across kinks
    if nodes == "auto":
        if not nestable:
            return random_kind(n_mc)
        if alignable:  # every kink on a panel edge: more accurate than "nested"
            return "aligned"
        # two outer coordinates: tensor Gauss-Hermite of order 16 there is exact at some points
        # and far off at others (docs/theory.md section 3.9): kept only where a QMC law cannot
        # tell it apart
        return "nested" if dims == 2 else "nested_or_random"
    if nodes == "nested" and not nestable:
        raise ValueError(
            "nested nodes resolve kinks along Theta* only: they need a noiseless single-index "
            f"target and 2 or 3 integration dimensions (k = {model.k}, noise = {model.noise}, "
            f"{dims} dimensions); use nodes='qmc'"
        )
    return nodes


#: a nested law with two outer coordinates is kept when its moments lie within this many
#: standard errors of a QMC law of the same map
NESTED_CHECK_SIGMAS = 3.0


def _nested_checked(curvature, kinks, dims, n_mc, n_qmc, rng):
    """Nested nodes (outer order 16) when they agree with QMC nodes, else the latter.

    The nested rule is not built where the number of kinks along ``Theta*`` changes between
    outer nodes (``inner_kink_counts`` of ``kinks``: a fold, whose square-root singularity the
    outer rule does not resolve); those laws fail the check below, so the nested rule would be
    built for nothing.

    Compared: every entry of ``E[D]`` and of ``E[z^2 D]`` (``z`` along ``Theta*``), within
    ``NESTED_CHECK_SIGMAS`` standard errors of the QMC estimate (from the spread of its
    scrambled replicates; plus 1e-12 of their size).  An error the check cannot see is within
    the QMC law's own error.  With ``n_mc`` given, ``n_mc`` i.i.d. draws take the place of the
    QMC nodes (reference and fallback)."""
    qm = gaussian_nodes(dims, random_kind(n_mc), None, n_mc, rng, n_qmc)
    D_q = curvature(qm.points)
    counts, _ = inner_kink_counts(kinks, dims - 1)
    if counts.min() != counts.max():  # a fold: the check rejects such laws; do not build it
        return qm, D_q
    nested = nested_nodes(curvature, dims - 1, NESTED_OUTER_ORDER[dims - 1])
    D_n = curvature(nested.points)

    def features(points, D):
        flat = D.reshape(len(D), -1)
        return np.concatenate([flat, points[:, :1] ** 2 * flat], 1)

    feats_q = features(qm.points, D_q)
    mean_q = qm.expect(feats_q)
    se = qm.standard_error(feats_q)
    gap = np.abs(nested.weights @ features(nested.points, D_n) - mean_q)
    if np.all(gap <= NESTED_CHECK_SIGMAS * se + 1e-12 * np.abs(mean_q).max()):
        return nested, D_n
    return qm, D_q


def _nested_order(C):
    """Outer order of nested nodes with one outer coordinate: ``60 s2`` within ``[240, 720]``,
    ``s2`` the variance of ``u`` along it: the features of ``D`` sit at the scale
    ``1/sqrt(s2)`` there (docs/theory.md section 3.9)."""
    s2 = float(np.max(np.sum(C * C, axis=1), initial=0.0))
    return int(min(NESTED_MAX_ORDER, max(NESTED_OUTER_ORDER[1], np.ceil(60.0 * s2))))


def _perp_factor(Q, M):
    """``C`` (``r x m``) with ``C^T C = Q - M M^T``; raises if that matrix is not PSD."""
    if not np.allclose(Q, Q.T, atol=1e-12 * max(1.0, np.abs(Q).max())):
        raise ValueError("Q = W^T W must be symmetric")
    P = Q - M @ M.T
    vals, vecs = np.linalg.eigh(0.5 * (P + P.T))
    tol = 1e-10 * max(1.0, np.abs(Q).max())
    if vals.min() < -tol:
        raise ValueError(
            f"Q - M M^T must be positive semidefinite; its smallest eigenvalue is {vals.min():.3g}"
        )
    keep = vals > tol
    return np.sqrt(vals[keep])[:, None] * vecs[:, keep].T


def _nodes_for(func, dims, nodes, order, n_mc, rng, n_qmc=QMC_NODES):
    if nodes == "nested":
        if dims < 2:
            raise ValueError("nested nodes need at least two integration dimensions")
        return nested_nodes(func, dims - 1, order or NESTED_OUTER_ORDER[dims - 1])
    if nodes == "adaptive" and dims == 2:
        return adaptive_2d(lambda pts: func(pts).reshape(pts.shape[0], -1))
    if nodes == "adaptive" or (nodes == "auto" and dims == 1):
        if dims != 1:
            raise ValueError(f"adaptive nodes need one or two integration dimensions; got {dims}")

        def features(z):
            v = func(z[:, None]).reshape(z.shape[0], -1)
            t = v / (1.0 + np.abs(v))  # bounded, with the kinks and jumps of v
            return np.concatenate([t, t * t, (z * z)[:, None] * t], axis=1)

        return adaptive_gauss_1d(features)
    return gaussian_nodes(dims, nodes, order, n_mc, rng, n_qmc)


def _mc_stderr(g, D):
    """The largest standard error of the entries of ``E[D]`` (random nodes), else ``None``."""
    se = g.standard_error(D)
    return None if se is None else float(np.max(se))


def _common_rank(D, w, scale) -> int:
    """``dim span(ranges of D_i)``: the rank of ``sum_i w_i D_i^2`` (docs/theory.md sec. 3)."""
    gram = np.einsum("n,nij,njk->ik", w, D, D)
    ev = np.linalg.eigvalsh(0.5 * (gram + gram.T))
    return int(np.sum(ev > 1e-12 * max(scale, 1e-300) ** 2))
