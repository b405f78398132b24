"""Escape from the plateau ``W1`` along negative curvature (docs/theory.md section 7.3).

Three views of one event: :func:`escape_step` reads it off a run's overlap curve;
:func:`predicted_escape_time` gives its order of magnitude ``log(d) / |lambda_out|`` from the
outlier alone; :func:`predict_escape` follows the linearised run from the eigenpairs at ``W1``.

Near the plateau, gradient descent with step ``lr`` is linear in the deviation ``delta`` from
the critical point ``W*`` it passes by: ``delta_{t+1} = (I - lr H) delta_t``, so the component
along an eigenvector ``v_j`` of ``H`` (eigenvalue ``lambda_j``) is multiplied by
``1 - lr lambda_j`` per step.  At the plateau step the gradient is ``g = H delta``, which gives
the components without knowing ``W*``: ``c_j = <v_j, g> / lambda_j``.  So, to first order,

    W_t = W1 + sum_j c_j ((1 - lr lambda_j)^t - 1) v_j,

and the escape is the first ``t`` at which the overlap ``||Theta*^T W_t||^2 / ||W_t||^2`` of
this linearised run reaches the threshold of :func:`rmt.gradient_descent`.  A single outlier
``lambda_o < 0`` with ``Theta*`` overlap ``rho`` gives, in gradient flow (``t = lr * steps``),
``t ~ log(A / |c_o|) / |lambda_o|`` with ``A`` of the order of ``||W1||``; with
``|c_o| ~ d^{-1/2}`` this is the order-of-magnitude estimate ``log(d) / (2 |lambda_o|)``.

When the bulk edge is also below 0, bulk directions grow too: they carry no ``Theta*`` and
dilute the overlap, so the escape is delayed, and when a bulk direction grows faster than the
outlier (``|lambda_edge| > |lambda_o|``) the linearised overlap never reaches the threshold:
the race is lost.  Only the eigenpairs passed in take part (the outlier and the bottom of the
bulk); the many bulk directions just above them also grow, more slowly.  The linearisation
ends when ``W_t - W1`` reaches the size of ``W1``, so the prediction misses the last,
non-linear stretch of the escape (measured: docs/theory.md section 7.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rmt.validation import (
    as_float_array,
    check_nonneg_float,
    check_positive_float,
    check_positive_int,
)


@dataclass(frozen=True, kw_only=True)
class EscapePrediction:
    """Predicted escape: ``steps`` after the plateau (``time = lr * steps``), or ``None``.

    ``index`` is the fastest-growing direction (the most negative eigenvalue given);
    ``race_won`` is True when the linearised overlap reaches the threshold, which needs that
    direction to carry more ``Theta*`` overlap than the threshold.  ``amplitudes`` are the
    components ``|c_j|`` at the plateau, ``theta_overlaps`` the eigenvectors' ``Theta*``
    overlaps, ``target = ||W1||_F`` the scale of the weights.
    """

    steps: float | None
    time: float | None
    index: int | None
    race_won: bool
    target: float
    amplitudes: np.ndarray
    theta_overlaps: np.ndarray


def predict_escape(values, vectors, grad, W1, lr, theta, threshold=0.5, max_steps=10**6):
    """Escape steps from the plateau, from the bottom eigenpairs and the gradient there.

    The linearised run ``W_t = W1 + sum_j c_j ((1 - lr lambda_j)^t - 1) v_j`` (module
    docstring) is followed until its overlap ``||Theta*^T W_t||^2 / ||W_t||^2`` first reaches
    ``threshold``: every direction given takes part, so a bulk direction that grows fast
    dilutes the overlap and delays the escape, and one that outgrows the outlier wins the race
    (then there is no escape: ``steps`` is ``None``).  The step is found by bisection on the
    monotone tail of the linearised overlap.

    Parameters
    ----------
    values : array (q,)
        Eigenvalues of ``H(W1)`` (including weight decay), any order.
    vectors : array (m d, q)
        Their orthonormal eigenvectors, neuron-major like ``rmt.Hessian``.
    grad : array (d, m)
        The gradient at ``W1``.
    W1 : array (d, m)
        The plateau weights.
    lr : float
        The step of gradient descent.
    theta : array (d, k)
        ``Theta*`` with orthonormal columns.
    threshold : float
        The overlap that counts as an escape (as in :func:`rmt.gradient_descent`).
    max_steps : int
        The search gives up (``steps = None``) beyond this many steps.

    Returns
    -------
    EscapePrediction
        ``steps`` and ``time`` (``None`` without escape), the fastest-growing direction
        ``index``, ``race_won`` and the amplitudes and overlaps of the directions.

    Raises
    ------
    ValueError
        For shapes that do not match or ``lr <= 0``.

    Notes
    -----
    See docs/theory.md section 7.3 (escape time).

    Examples
    --------
    One negative direction along ``Theta*`` and one positive direction carrying ``W1``:
    gradient descent on the quadratic model of the loss at ``W1`` reaches the overlap 1/2
    after the predicted number of steps.

    >>> import numpy as np
    >>> import rmt
    >>> d, lr = 20, 1.0
    >>> theta, vectors = np.eye(d)[:, :1], np.eye(d)[:, :2]
    >>> values = np.array([-0.2, 0.5])
    >>> W1 = np.eye(d)[:, 1:2] + 1e-3 * theta
    >>> grad = -1e-3 * theta
    >>> pred = rmt.predict_escape(values, vectors, grad, W1, lr, theta)
    >>> pred.race_won, pred.index
    (True, 0)
    >>> H = vectors @ np.diag(values) @ vectors.T
    >>> W, t = W1.copy(), 0
    >>> while W[0, 0] ** 2 / np.sum(W**2) < 0.5:
    ...     W = W - lr * (grad + H @ (W - W1))
    ...     t += 1
    >>> t, int(np.ceil(pred.steps))
    (30, 30)
    """
    lam = as_float_array(values, "values", ndim=1)
    V = as_float_array(vectors, "vectors", ndim=2)
    g = as_float_array(grad, "grad", ndim=2)
    W1 = as_float_array(W1, "W1", ndim=2)
    theta = as_float_array(theta, "theta")
    theta = theta[:, None] if theta.ndim == 1 else theta
    lr = check_positive_float(lr, "lr")
    d, m = W1.shape
    if V.shape != (g.size, lam.size) or W1.shape != g.shape or theta.shape[0] != d:
        raise ValueError(
            f"need vectors (m d, q), grad and W1 (d, m), theta (d, k); got vectors {V.shape}, "
            f"grad {g.shape}, W1 {W1.shape}, theta {theta.shape}"
        )
    proj = V.T @ np.ascontiguousarray(g.T).reshape(-1)
    amp = proj / lam
    growth = np.log(np.abs(1.0 - lr * lam))
    w1 = np.ascontiguousarray(W1.T).reshape(-1)
    # per direction: its Theta* part (m x k) and the cross terms needed for the overlap
    Vt = V.T.reshape(lam.size, m, d) @ theta  # (q, m, k)
    base = W1.T @ theta  # (m, k)

    def overlap(t):
        f = amp * (np.exp(growth * t) * np.sign(1.0 - lr * lam) ** int(t) - 1.0)
        num = base + np.tensordot(f, Vt, axes=(0, 0))
        w = w1 + V @ f
        return float(np.sum(num * num) / (w @ w))

    fastest = int(np.argmax(np.where(lam < 0, growth, -np.inf))) if np.any(lam < 0) else None
    ov = _theta_share(Vt)
    target = float(np.linalg.norm(W1))
    no_escape = EscapePrediction(
        steps=None,
        time=None,
        index=fastest,
        race_won=False,
        target=target,
        amplitudes=np.abs(amp),
        theta_overlaps=ov,
    )
    if fastest is None or ov[fastest] < threshold:
        return no_escape
    lo, hi = 0, 1
    while overlap(hi) < threshold:
        lo, hi = hi, 2 * hi
        if hi > max_steps:
            return no_escape
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if overlap(mid) < threshold else (lo, mid)
    return EscapePrediction(
        steps=float(hi),
        time=float(hi) * lr,
        index=fastest,
        race_won=True,
        target=target,
        amplitudes=np.abs(amp),
        theta_overlaps=ov,
    )


def _theta_share(Vt) -> np.ndarray:
    """Squared ``Theta*`` overlap of each eigenvector from its projections (``q x m x k``)."""
    return np.sum(Vt * Vt, axis=(1, 2))


def escape_step(overlap, plateau_step, threshold) -> int | None:
    """First step ``t > plateau_step`` with ``overlap[t] >= threshold``.

    ``None`` when there is none, when ``plateau_step`` is ``None``, or when the overlap already
    reaches ``threshold`` at the plateau (then the directions were learned in the first phase;
    :class:`Phases` reports that as ``learned_in_first_phase``).  NaN overlaps never cross.
    """
    if plateau_step is None:
        return None
    overlap = np.asarray(overlap, dtype=np.float64)
    if not overlap[plateau_step] < threshold:
        return None
    after = np.flatnonzero(overlap[plateau_step + 1 :] >= threshold)
    return int(plateau_step + 1 + after[0]) if after.size else None


class EscapeTime(NamedTuple):
    """Predicted escape delay: ``time`` in gradient-flow units and ``steps = time / lr``."""

    time: float
    steps: float


def predicted_escape_time(lambda_out, d, lr) -> EscapeTime:
    """Escape delay ``log(d) / |lambda_out|`` from a saddle with curvature ``lambda_out < 0``.

    docs/theory.md section 6: from the post-first-phase point, the component of ``W`` along the most
    negative Hessian direction starts at the random level ``~ d^{-1/2}`` and grows like
    ``exp(|lambda_out| t)`` under gradient flow, so leaving the plateau takes a time of order
    ``log(d)/|lambda_out|``.  This is an order of magnitude (the constant depends on the
    initial overlap and the escape threshold: growth of the amplitude from ``d^{-1/2}`` to
    ``O(1)`` alone gives ``log(d) / (2 |lambda_out|)``).  Gradient descent with step ``lr``
    needs ``time / lr`` steps.

    Parameters
    ----------
    lambda_out : float
        The (negative) outlier eigenvalue.
    d : int
        Input dimension, at least 2.
    lr : float
        Step of gradient descent, ``> 0``.

    Returns
    -------
    EscapeTime
        ``(time, steps)``.

    Raises
    ------
    TypeError
        When ``lambda_out`` is not a real number.
    ValueError
        When ``lambda_out >= 0`` or not finite, ``d < 2`` or ``lr <= 0``.

    Examples
    --------
    >>> import numpy as np
    >>> import rmt
    >>> esc = rmt.predicted_escape_time(-0.5, 1000, lr=0.5)
    >>> bool(np.isclose(esc.time, np.log(1000) / 0.5)), bool(np.isclose(esc.steps, esc.time / 0.5))
    (True, True)
    """
    try:
        lam = float(lambda_out)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"lambda_out must be a real number; got {lambda_out!r}") from exc
    if not np.isfinite(lam) or lam >= 0:
        raise ValueError(
            f"lambda_out must be a finite negative curvature (< 0); got {lambda_out!r}"
        )
    d = check_positive_int(d, "d", minimum=2)
    lr = check_nonneg_float(lr, "lr")
    if lr == 0:
        raise ValueError(f"lr must be > 0; got {lr!r}")
    time = float(np.log(d) / abs(lam))
    return EscapeTime(time, time / lr)


@dataclass(frozen=True, kw_only=True)
class PlateauPrediction:
    """The predicted length of the plateau from the spectrum at ``W1`` (:func:`plateau_length`).

    ``steps`` is the number of gradient-descent steps from the plateau to the escape, and
    ``time = lr * steps`` the same in gradient-flow time; both are ``None`` when no escape
    along ``Theta*`` is predicted, with ``reason`` saying why (no negative outlier, or a bulk
    direction that grows at least as fast).  ``gap`` is ``edge - outlier``; ``growth`` the
    per-step factors ``|1 - lr lambda|`` of the outlier and of the left edge;
    ``log_race_start`` the logarithm of the head start the bulk has (``log(m d)``).
    """

    steps: float | None
    time: float | None
    gap: float
    growth: tuple
    log_race_start: float
    reason: str = ""


def _log_bulk_energy(t, log_growth, log_weights) -> float:
    """``log(atom + int rho(lambda) |1 - lr lambda|^(2 t) dlambda)`` on the quadrature of the
    density (``log_weights`` include the atom at 0 as a node of growth 1)."""
    v = log_weights + 2.0 * t * log_growth
    top = np.max(v)
    return float(top + np.log(np.sum(np.exp(v - top))))


def plateau_length(
    outlier, edge, eigenvalues, density, *, atom=0.0, width, d, lr, max_steps=1e9
) -> PlateauPrediction:
    """The plateau length of gradient descent: the race of the ``Theta*`` outlier with the
    bulk of the Hessian at ``W1`` (docs/theory.md section 7.7).

    Linearised at the plateau, the component of ``W`` along an eigenvector with eigenvalue
    ``lambda`` grows by ``|1 - lr lambda|`` per step.  At the plateau the deviation is spread
    over the ``m d`` directions (each carries ``1 / (m d)`` of it); the outlier's share must
    outgrow what the whole bulk (and the weights themselves) carry:

        |1 - lr lambda_o|^(2 t) / (m d)  =  1 + atom + int rho(lambda) |1 - lr lambda|^(2 t)

    and the predicted plateau is the root ``t``.  Far from the threshold (the bulk does not
    grow) it is ``log(m d) / (2 log|1 - lr lambda_o|)``, the ``log d`` law; near it, where the
    outlier has just left a negative edge (a square-root edge: the bulk term grows like
    ``t^(-3/2) |1 - lr lambda_e|^(2 t)``), the root grows like ``(m d)^(2/3)`` as the gap closes,
    and it diverges at the threshold.

    Parameters
    ----------
    outlier : float
        The ``Theta*`` outlier of the Hessian at ``W1``.
    edge : float
        The left edge of its bulk.
    eigenvalues, density : array (p,)
        A grid over the bulk's support and the bulk density on it (its mass, with ``atom``, is
        normalised to 1 here).
    atom : float
        The mass of the bulk's atom at 0 (directions that neither grow nor shrink).
    width, d : int
        The width ``m`` and the dimension: ``m d`` directions.
    lr : float
        The step of gradient descent.
    max_steps : float
        The longest plateau searched; a root beyond it is reported as ``None``.

    Returns
    -------
    PlateauPrediction

    Raises
    ------
    ValueError
        For grids of different sizes, a negative density, or non-positive ``lr``, ``width``,
        ``d``.

    Examples
    --------
    Without a growing bulk the plateau is ``log(m d) / (2 log(1 + lr |lambda_o|))``:

    >>> import numpy as np
    >>> x = np.linspace(0.5, 1.5, 201)
    >>> p = plateau_length(-0.2, 0.5, x, np.ones_like(x), width=2, d=1000, lr=0.5)
    >>> bool(abs(p.steps - np.log(2000) / (2 * np.log(1.1))) < 0.05)
    True
    """
    lr = check_positive_float(lr, "lr")
    m, d = check_positive_int(width, "width"), check_positive_int(d, "d")
    x = as_float_array(eigenvalues, "eigenvalues", ndim=1)
    rho = as_float_array(density, "density", ndim=1)
    if x.shape != rho.shape or x.size < 2:
        raise ValueError(f"eigenvalues and density need one shape of >= 2 points; got {x.shape}")
    if np.any(rho < 0):
        raise ValueError("density must be nonnegative")
    atom = check_nonneg_float(atom, "atom")
    g_o, g_e = abs(1.0 - lr * outlier), abs(1.0 - lr * edge)
    gap = float(edge - outlier)
    common = dict(gap=gap, growth=(g_o, g_e), log_race_start=float(np.log(m * d)))
    if not outlier < min(edge, 0.0):
        why = "no negative outlier below the bulk: the plateau does not end along Theta*"
        return PlateauPrediction(steps=None, time=None, reason=why, **common)
    if g_o <= g_e:
        why = "a bulk direction grows at least as fast as the outlier: the race is lost"
        return PlateauPrediction(steps=None, time=None, reason=why, **common)
    w = np.zeros_like(x)
    w[1:] += 0.5 * np.diff(x) * rho[1:]
    w[:-1] += 0.5 * np.diff(x) * rho[:-1]
    w *= (1.0 - atom) / max(np.sum(w), np.finfo(float).tiny)
    nodes_g = np.abs(1.0 - lr * x)
    keep = w > 0
    log_g = np.concatenate([np.log(nodes_g[keep]), [0.0, 0.0]])  # the atom; the weights, 1
    log_w = np.concatenate([np.log(w[keep]), [np.log(atom) if atom > 0 else -np.inf, 0.0]])

    def excess(t):
        return 2.0 * t * np.log(g_o) - np.log(m * d) - _log_bulk_energy(t, log_g, log_w)

    lo, hi = 0.0, 1.0
    while excess(hi) < 0:
        lo, hi = hi, 2.0 * hi
        if hi > max_steps:
            why = f"the outlier does not outgrow the bulk within {max_steps:.3g} steps"
            return PlateauPrediction(steps=None, time=None, reason=why, **common)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
        if hi - lo <= 1e-9 * hi:
            break
    steps = 0.5 * (lo + hi)
    return PlateauPrediction(steps=steps, time=lr * steps, **common)


def outlier_growth(steps, outliers, lr) -> tuple[float, int | None]:
    """The growth of the ``Theta*`` component while the outlier lasts (docs/theory.md 7.7).

    Along the plateau the Hessian drifts; its ``Theta*`` outlier ``lambda_o(t)`` multiplies the
    component along it by ``|1 - lr lambda_o(t)|`` per step until it merges with the bulk edge.
    This is ``G = sum_{t1 <= t < t_merge} log|1 - lr lambda_o(t)|``, by the trapezoid rule on
    the evaluated steps, with half of the interval in which the outlier disappears.

    Parameters
    ----------
    steps : array_like (K,)
        Increasing steps, the first the plateau ``t1``.
    outliers : array_like (K,)
        The ``Theta*`` outlier at each step; NaN where there is none (merged with the edge).
    lr : float
        The step size.

    Returns
    -------
    growth : float
        ``G`` (natural logarithm); 0 when there is no outlier at ``t1``.
    merge : int or None
        The first evaluated step without an outlier (None: it lasts to the last step, and
        ``G`` is a lower bound).

    Raises
    ------
    ValueError
        For steps that do not increase, or arrays of different lengths.
    """
    t = as_float_array(steps, "steps", ndim=1)
    lam = np.asarray(outliers, dtype=np.float64)
    if lam.shape != t.shape:
        raise ValueError(f"outliers must have the shape of steps {t.shape}; got {lam.shape}")
    if t.size > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("steps must increase")
    lr = check_positive_float(lr, "lr")
    gone = np.flatnonzero(~np.isfinite(lam))
    if gone.size and gone[0] == 0:
        return 0.0, int(t[0])
    k = int(gone[0]) if gone.size else t.size
    logs = np.log(np.abs(1.0 - lr * lam[:k]))
    growth = float(np.sum(np.diff(t[:k]) * (logs[1:] + logs[:-1]) / 2.0))
    if not gone.size:
        return growth, None
    return growth + float((t[k] - t[k - 1]) * logs[-1] / 2.0), int(t[k])


#: standard normal draws (seeded) for the quantiles of ``|v|^2``, ``v ~ N(0, S)``
ROW_QUANTILE_DRAWS = 200_000


def seeded_escape_steps(seed_cov, trace_q, d, quantiles=(0.25, 0.5, 0.75), escape_overlap=0.5):
    """Quantiles over runs of the escape step of a run at finite ``d``, from the covariance of
    its ``Theta*`` row (docs/theory.md 7.8).

    While the overlap is small, ``v(t) = sqrt(d) M(t)`` is Gaussian, ``N(0, S(t))``, and the
    overlap is ``|v(t)|^2 / (d tr Q(t))``.  A run escapes when it reaches ``escape_overlap``;
    runs keep their order as ``|v|`` grows, so the escape step of quantile ``q`` (over runs) is
    the first ``t`` at which the ``1 - q`` quantile of ``|v(t)|^2`` reaches
    ``escape_overlap d tr Q(t)``.  The growth is followed linearly up to that level, so the
    last, non-linear stretch of the escape is left out.

    Parameters
    ----------
    seed_cov : array_like (T + 1, m, m)
        ``S(t)``: :attr:`rmt.dynamics.dmft.DMFTResult.seed_cov`.
    trace_q : array_like (T,)
        ``tr Q(t)`` along the same solve.
    d : int
        The dimension.
    quantiles : sequence of float
        Quantiles over runs, each in ``(0, 1)``.
    escape_overlap : float
        The overlap that counts as the escape (that of :func:`rmt.gradient_descent`).

    Returns
    -------
    list of int or None
        One escape step per quantile; None where it lies beyond the ``T`` steps given (the
        prediction is then "later than ``T``").

    Raises
    ------
    ValueError
        For arrays of inconsistent shapes or non-finite entries, or bad ``d``, quantiles or
        overlap.

    Examples
    --------
    One neuron whose row grows by 10% a step from ``S(0) = 1``, ``tr Q = 1``, ``d = 100``:
    the median run (``|v|^2`` at its median, 0.455 ``S``) reaches overlap 0.5 when
    ``1.21^t 0.455 >= 50``, at ``t = 25``:

    >>> import numpy as np
    >>> from rmt.dynamics.escape import seeded_escape_steps
    >>> S = 1.21 ** np.arange(41.0)[:, None, None]
    >>> seeded_escape_steps(S, np.ones(41), 100, quantiles=(0.5,))
    [25]
    """
    return seeded_escape_table(seed_cov, trace_q, [d], quantiles, escape_overlap)[int(d)]


def seeded_escape_table(seed_cov, trace_q, sizes, quantiles=(0.25, 0.5, 0.75), escape_overlap=0.5):
    """:func:`seeded_escape_steps` at several dimensions at once: the quantiles of ``|v(t)|^2``
    do not depend on ``d``, so they are computed once.

    Parameters
    ----------
    seed_cov, trace_q, quantiles, escape_overlap
        As in :func:`seeded_escape_steps`.
    sizes : sequence of int
        The dimensions.

    Returns
    -------
    dict
        ``{d: [escape step or None per quantile]}``.

    Raises
    ------
    ValueError
        As :func:`seeded_escape_steps`.

    Examples
    --------
    >>> import numpy as np
    >>> from rmt.dynamics.escape import seeded_escape_table
    >>> S = 1.21 ** np.arange(61.0)[:, None, None]
    >>> seeded_escape_table(S, np.ones(61), [100, 10_000], quantiles=(0.5,))
    {100: [25], 10000: [49]}
    """
    S = as_float_array(seed_cov, "seed_cov", ndim=3)
    tq = as_float_array(trace_q, "trace_q", ndim=1)
    if S.shape[1] != S.shape[2] or S.shape[0] < tq.size or tq.size < 1:
        raise ValueError(
            f"seed_cov must be (T + 1, m, m) with T + 1 >= len(trace_q); got {S.shape}, {tq.shape}"
        )
    if not (np.all(np.isfinite(S[: tq.size])) and np.all(np.isfinite(tq))):
        raise ValueError("seed_cov and trace_q must be finite")
    dims = [check_positive_int(d, "d") for d in sizes]
    escape_overlap = check_positive_float(escape_overlap, "escape_overlap")
    qs = [float(q) for q in quantiles]
    if not qs or not all(0.0 < q < 1.0 for q in qs):
        raise ValueError(f"quantiles must lie in (0, 1); got {quantiles!r}")
    m = S.shape[1]
    g2 = np.random.default_rng(0).standard_normal((ROW_QUANTILE_DRAWS, m)) ** 2
    lam = np.clip(np.linalg.eigvalsh(S[: tq.size]), 0.0, None)  # (T, m)
    levels = np.empty((len(qs), tq.size))
    for a in range(0, tq.size, 64):  # |v(t)|^2 = sum_j lam_j(t) g_j^2, 64 steps at a time
        levels[:, a : a + 64] = np.quantile(g2 @ lam[a : a + 64].T, [1 - q for q in qs], axis=0)
    out = {}
    for d in dims:
        reached = levels >= escape_overlap * d * tq
        out[d] = [int(np.argmax(row)) if row.any() else None for row in reached]
    return out
