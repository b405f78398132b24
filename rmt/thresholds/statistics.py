"""Statistical decisions for thresholds measured by simulation (docs/theory.md section 7.4).

Two questions are asked of simulations at a given ``d`` and set of seeds:

* how much ``Theta*`` does the most negative direction of the Hessian at the post-first-phase
  point ``W1`` carry?  The *order parameter* (:func:`order_parameter`) is the squared ``Theta*``
  overlap of the bottom eigenvector when its eigenvalue is negative, else 0;
  :func:`descent_outlier_decision` turns one spectrum into a yes/no by a test whose null law
  (:func:`overlap_null_level`) and family-wise error rate are stated;
* at which ``delta`` does it switch on?  :func:`bisect_order_parameter` locates where the seed
  mean of the order parameter crosses a level that the null cannot reach
  (:func:`order_level`), with an interval from the seeds' standard errors
  (:func:`crossing_estimate`); :func:`bisect_transition` does the same for a yes/no outcome
  by seed majority (e.g. "gradient descent learned Theta*").

Every rule is documented here and in the theory document, so that an estimate can be reproduced
and its interval read for what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.stats import beta, binom
from scipy.stats import t as student

from rmt.validation import as_float_array, check_positive_float, check_positive_int

#: one-sided level of the null quantile of :func:`overlap_null_level` (one test)
OVERLAP_LEVEL = 0.999
#: family-wise error rate of the overlap test against the null law
FWER = 0.01
#: the order parameter's level: a Theta* outlier's eigenvector carries at least this share
ORDER_LEVEL = 0.05
#: two-sided level of the crossing interval (each end at alpha/2, Bonferroni over evaluations)
INTERVAL_ALPHA = 0.1
#: a gap above this multiple of the median spacing above it separates the bottom (reported)
GAP_FACTOR = 2.5


def overlap_null_level(d, k, m, level=OVERLAP_LEVEL, n_tests=1) -> float:
    """Null quantile of the squared ``Theta*`` overlap, Bonferroni-corrected over ``n_tests``.

    Implements the null law of docs/theory.md section 7.4.  A uniformly random unit vector of
    ``R^{N}``, ``N = m d``, has squared projection on a fixed ``r``-dimensional subspace
    distributed as ``Beta(r/2, (N - r)/2)``; for ``R^m (x) span(Theta*)``, ``r = m k`` (mean
    ``k/d``).  An eigenvector of an orthogonally invariant matrix (a delocalised bulk
    eigenvector) has exactly this law, whatever ``Theta*``.

    Parameters
    ----------
    d, k, m : int
        Dimension, number of hidden directions (``k < d``) and width.
    level : float
        One-sided level of the family, in ``(0, 1)``: the family-wise error rate is
        ``1 - level``.
    n_tests : int
        Number of overlaps compared with the quantile (eigenvectors times spectra).

    Returns
    -------
    float
        The ``1 - (1 - level) / n_tests`` quantile: by the union bound, ``n_tests`` null
        overlaps all stay below it with probability at least ``level``.
    """
    d, k, m = (check_positive_int(v, name) for v, name in ((d, "d"), (k, "k"), (m, "m")))
    n_tests = check_positive_int(n_tests, "n_tests")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    if k >= d:
        raise ValueError(f"k must be < d; got k = {k}, d = {d}")
    r, N = m * k, m * d
    return float(beta.isf((1.0 - level) / n_tests, r / 2.0, (N - r) / 2.0))


def overlap_null_sf(x, d, k, m) -> float:
    """``P(o > x)`` for a null squared overlap ``o ~ Beta(mk/2, m(d-k)/2)`` (section 7.4).

    Parameters
    ----------
    x : float
        Squared overlap.
    d, k, m : int
        Dimension, number of hidden directions and width.

    Returns
    -------
    float
    """
    r, N = m * k, m * d
    return float(beta.sf(float(x), r / 2.0, (N - r) / 2.0))


def order_parameter(value, overlap) -> float:
    """The order parameter of one spectrum at ``W1`` (docs/theory.md section 7.4).

    Parameters
    ----------
    value : float or None
        Bottom eigenvalue of ``H(W1)`` (``None``: no plateau, hence no ``W1``).
    overlap : float or None
        Squared ``Theta*`` overlap of its eigenvector.

    Returns
    -------
    float
        ``overlap`` when ``value < 0`` (the most negative direction, the one gradient descent
        follows out of the plateau), else 0 (no descent direction, or no ``W1``).

    Examples
    --------
    >>> import rmt
    >>> rmt.order_parameter(-0.3, 0.8), rmt.order_parameter(0.1, 0.8)
    (0.8, 0.0)
    >>> rmt.order_parameter(None, None)
    0.0
    """
    if value is None or overlap is None or not value < 0:
        return 0.0
    return float(overlap)


def order_level(d, k, m, n_draws, level=ORDER_LEVEL, alpha=FWER) -> float:
    """The level that the seed mean of the order parameter must cross (section 7.4).

    A seed mean at or above ``c`` needs one seed at or above ``c``; over ``n_draws`` spectra
    (seeds times evaluated ``delta``) the null reaches ``c`` with probability at most
    ``n_draws P(o > c)``.  The level is ``level`` or, where that is smaller, the null quantile
    that makes this bound ``alpha``.

    Parameters
    ----------
    d, k, m : int
        Dimension, number of hidden directions and width.
    n_draws : int
        Number of spectra whose order parameters enter the estimate.
    level : float
        The stated level (default :data:`ORDER_LEVEL`).
    alpha : float
        Family-wise error rate of the null (default :data:`FWER`).

    Returns
    -------
    float
    """
    return max(float(level), overlap_null_level(d, k, m, 1.0 - alpha, n_draws))


@dataclass(frozen=True, kw_only=True)
class OutlierDecision:
    """Whether the bottom of one spectrum is a negative outlier carrying ``Theta*``.

    ``index`` is the tested eigenvector that passed (``None`` when none did), ``value`` and
    ``overlap`` its eigenvalue and squared ``Theta*`` overlap.  ``overlap_null`` is the null
    quantile of the family (:func:`overlap_null_level` at ``1 - alpha`` over ``n_tests``),
    ``threshold`` the larger of it and the stated level, ``p_value`` the Bonferroni-adjusted
    null probability of the largest tested overlap.  ``n_outliers`` and ``gap_ratio`` describe
    the separation of the bottom eigenvalues (reported, not part of the rule).
    """

    has_outlier: bool
    index: int | None
    value: float | None
    overlap: float | None
    n_outliers: int
    gap_ratio: float
    overlap_null: float
    reason: str
    threshold: float = ORDER_LEVEL
    p_value: float = 1.0
    n_tests: int = 1
    alpha: float = FWER


def bottom_gap(values, max_outliers, gap_factor=GAP_FACTOR) -> tuple[int, float]:
    """Separation of the bottom of an ascending spectrum (docs/theory.md section 7.4).

    Parameters
    ----------
    values : array_like
        Ascending eigenvalues ``l_1 <= ... <= l_q``, ``q >= 4``.
    max_outliers : int
        Largest number ``J`` of outliers considered (at most ``q - 3``).
    gap_factor : float
        A gap ratio above it separates the bottom.

    Returns
    -------
    n_outliers : int
        ``j`` at the largest ratio of the gap ``l_{j+1} - l_j`` to the median spacing of
        ``l_{j+1..q}``, ``j = 1..J``, when that ratio exceeds ``gap_factor``; else 0.
    gap_ratio : float
        That largest ratio.
    """
    lam = np.asarray(values, dtype=float)
    J = min(int(max_outliers), lam.size - 3)
    ratios = []
    for j in range(1, J + 1):
        spacing = float(np.median(np.diff(lam[j:])))
        gap = float(lam[j] - lam[j - 1])
        ratios.append(gap / spacing if spacing > 0 else np.inf)
    best = int(np.argmax(ratios))
    ratio = float(ratios[best])
    return (best + 1 if ratio > gap_factor else 0), ratio


def _check_spectrum(values, overlaps):
    lam = as_float_array(values, "values", ndim=1)
    ov = as_float_array(overlaps, "overlaps", ndim=1)
    if lam.shape != ov.shape:
        raise ValueError(f"values and overlaps need one entry each; got {lam.shape}, {ov.shape}")
    if lam.size < 4:
        raise ValueError(f"need at least 4 eigenvalues to judge separation; got {lam.size}")
    if np.any(np.diff(lam) < 0):
        raise ValueError("values must be sorted ascending")
    return lam, ov


def descent_outlier_decision(
    values,
    overlaps,
    d,
    k,
    m,
    *,
    alpha=FWER,
    n_vectors=1,
    n_spectra=1,
    min_overlap=ORDER_LEVEL,
    gap_factor=GAP_FACTOR,
    max_outliers=None,
) -> OutlierDecision:
    """Decide whether the most negative directions of a spectrum carry ``Theta*``.

    Implements the rule of docs/theory.md section 7.4.  The bottom ``n_vectors`` eigenvectors
    are tested (default 1: the most negative direction, the one gradient descent follows).  A
    tested eigenvector passes when its eigenvalue is negative and its squared overlap exceeds
    ``threshold = max(overlap_null, min_overlap)``, ``overlap_null`` the null quantile at
    family-wise level ``alpha`` over ``n_tests = n_vectors * n_spectra`` tests.  On spectra
    whose tested eigenvectors follow the null law (any orthogonally invariant matrix, e.g. a
    GOE with no spike) the family of ``n_spectra`` decisions says "yes" at least once with
    probability at most ``alpha`` (union bound, no independence needed).

    Parameters
    ----------
    values : array_like
        Ascending bottom eigenvalues ``l_1 <= ... <= l_q``, ``q >= 4``.
    overlaps : array_like
        Squared ``Theta*`` overlaps of their eigenvectors.
    d, k, m : int
        Dimension, number of hidden directions and width.
    alpha : float
        Family-wise error rate against the null.
    n_vectors : int
        Number of bottom eigenvectors tested.
    n_spectra : int
        Number of spectra decided together (seeds times ``delta``), counted in the correction.
    min_overlap : float
        The stated level a ``Theta*`` outlier must also reach (:data:`ORDER_LEVEL`).
    gap_factor : float
        Separation reported by :func:`bottom_gap` (not part of the rule).
    max_outliers : int, optional
        Outliers considered by :func:`bottom_gap` (default ``m k``).

    Returns
    -------
    OutlierDecision

    Examples
    --------
    A separated negative eigenvalue whose eigenvector carries 40% of ``Theta*`` at d = 1000 is
    an outlier; one that carries 0.1% is not (the null quantile is near ``1/(m d)``):

    >>> values = [-0.5, -0.1, -0.09, -0.08]
    >>> descent_outlier_decision(values, [0.4, 0.0, 0.0, 0.0], 1000, 1, 2).has_outlier
    True
    >>> descent_outlier_decision(values, [0.001, 0.0, 0.0, 0.0], 1000, 1, 2).has_outlier
    False
    """
    lam, ov = _check_spectrum(values, overlaps)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha}")
    gap_factor = check_positive_float(gap_factor, "gap_factor")
    n_vec = min(check_positive_int(n_vectors, "n_vectors"), lam.size)
    n_tests = n_vec * check_positive_int(n_spectra, "n_spectra")
    null = overlap_null_level(d, k, m, 1.0 - alpha, n_tests)
    threshold = max(null, float(min_overlap))
    J = m * k if max_outliers is None else check_positive_int(max_outliers, "max_outliers")
    n_out, ratio = bottom_gap(lam, J, gap_factor)
    best = float(np.max(ov[:n_vec]))
    p = min(1.0, n_tests * overlap_null_sf(best, d, k, m))
    common = dict(threshold=threshold, p_value=p, n_tests=n_tests, alpha=float(alpha))
    for i in range(n_vec):
        if lam[i] < 0 and ov[i] > threshold:
            return OutlierDecision(
                has_outlier=True,
                index=i,
                value=float(lam[i]),
                overlap=float(ov[i]),
                n_outliers=n_out,
                gap_ratio=ratio,
                overlap_null=null,
                reason="",
                **common,
            )
    if best <= null:
        reason = (
            f"the tested overlap {best:.3g} is within the null: below its quantile {null:.3g} "
            f"at family-wise level {alpha:g} over {n_tests} test(s)"
        )
    elif best <= threshold:
        reason = (
            f"the tested overlap {best:.3g} is above the null but below the level {threshold:.3g}"
        )
    else:
        reason = "the eigenvector carrying Theta* is not negative"
    return OutlierDecision(
        has_outlier=False,
        index=None,
        value=None,
        overlap=None,
        n_outliers=n_out,
        gap_ratio=ratio,
        overlap_null=null,
        reason=reason,
        **common,
    )


@dataclass(frozen=True, kw_only=True)
class CrossingEstimate:
    """Where the seed mean of the order parameter crosses its level (:func:`crossing_estimate`).

    ``delta`` is the crossing interpolated (linearly in ``log delta``) inside ``bracket``, the
    two evaluated ``delta`` around the last crossing from below; ``interval`` runs from the
    largest ``delta`` whose mean is significantly below ``level`` to the smallest whose mean
    is significantly above (an end is ``None`` where no evaluation is significant; the whole
    interval is ``None`` with one seed).  When ``found`` is False, ``delta``, ``bracket`` and
    ``interval`` are ``None`` and ``reason`` says why, never a made-up number.  ``level`` is
    the level used: ``stated_level`` or, where larger, ``null_level`` (the null quantile at
    family-wise rate ``fwer``, :func:`order_level`).  ``evaluations`` are dicts ``delta``,
    ``mean``, ``se``, ``n``, ``values``.
    """

    delta: float | None
    bracket: tuple | None
    interval: tuple | None
    level: float
    alpha: float
    found: bool
    reason: str = ""
    interval_reason: str = ""
    stated_level: float = ORDER_LEVEL
    null_level: float | None = None
    fwer: float = FWER
    evaluations: list = field(default_factory=list)

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("bracket", "interval"):
            out[key] = None if out[key] is None else list(out[key])
        out["evaluations"] = [dict(e, values=list(e["values"])) for e in self.evaluations]
        return out


def _summaries(evaluations) -> list[dict]:
    """``(delta, values)`` pairs as sorted dicts with the seed mean and its standard error."""
    out = []
    for x, values in sorted(evaluations, key=lambda e: float(e[0])):
        v = np.asarray(values, dtype=float)
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise ValueError(f"need finite values at every delta; got {values!r} at {x}")
        se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else None
        out.append({"delta": float(x), "mean": float(v.mean()), "se": se, "n": int(v.size),
                    "values": [float(u) for u in v]})  # fmt: skip
    return out


def crossing_estimate(evaluations, level, alpha=INTERVAL_ALPHA) -> CrossingEstimate:
    """Where the seed mean of an order parameter crosses ``level`` (docs/theory.md 7.4).

    The mean ``mu(delta)`` is assumed non-decreasing.  The crossing is bracketed by the last
    evaluation below ``level`` and the first at or above it after which every mean stays at or
    above; the estimate interpolates linearly in ``log delta`` between them.  The interval uses
    one-sided t-tests of the seed mean at each evaluated ``delta`` (``n - 1`` degrees of
    freedom, level ``alpha / (2 E)`` over the ``E`` evaluations, Bonferroni): below ``level``
    when ``mu + t se < level``, above when ``mu - t se > level``.  With a monotone mean and
    normal seed means it covers the crossing with probability at least ``1 - alpha``.

    Parameters
    ----------
    evaluations : iterable of (float, sequence of float)
        ``delta`` and the order parameter of each seed there.
    level : float
        The level crossed.
    alpha : float
        Two-sided level of the interval.

    Returns
    -------
    CrossingEstimate
    """
    ev = _summaries(evaluations)
    if not ev:
        raise ValueError("need at least one evaluation")
    above = [e["mean"] >= level for e in ev]
    common = dict(level=float(level), alpha=float(alpha), evaluations=ev)
    if not above[-1]:
        last = ev[-1]
        why = f"the seed mean stays below {level:.3g} up to delta = {last['delta']:g} "
        return CrossingEstimate(
            delta=None,
            bracket=None,
            interval=None,
            found=False,
            reason=why + f"({last['mean']:.3g})",
            **common,
        )
    i = len(ev) - 1
    while i > 0 and above[i - 1]:
        i -= 1
    if i == 0:
        why = f"the seed mean is already at or above {level:.3g} at delta = {ev[0]['delta']:g}"
        return CrossingEstimate(
            delta=None, bracket=None, interval=None, found=False, reason=why, **common
        )
    a, b = ev[i - 1], ev[i]
    frac = (level - a["mean"]) / (b["mean"] - a["mean"])
    delta = float(np.exp(np.log(a["delta"]) + frac * np.log(b["delta"] / a["delta"])))
    interval, why = _crossing_interval(ev, level, alpha, delta)
    bracket = (a["delta"], b["delta"])
    return CrossingEstimate(
        delta=delta, bracket=bracket, interval=interval, found=True, interval_reason=why, **common
    )


def _crossing_interval(ev, level, alpha, delta):
    """The significance interval of :func:`crossing_estimate` and a note on its ends."""
    if min(e["n"] for e in ev) < 2:
        return None, "one seed: the seed mean has no standard error"
    q = alpha / (2 * len(ev))
    below, above = [], []
    for e in ev:
        half = float(student.ppf(1 - q, e["n"] - 1)) * e["se"]
        if e["mean"] + half < level:
            below.append(e["delta"])
        if e["mean"] - half > level:
            above.append(e["delta"])
    lo = max(below) if below else None
    hi = min(above) if above else None
    notes = []
    if lo is None:
        notes.append("no evaluation is significantly below the level")
    if hi is None:
        notes.append("no evaluation is significantly above the level")
    if lo is not None and hi is not None and hi < lo:
        lo, hi = hi, lo
        notes.append("not monotone: a significant 'above' lies below a significant 'below'")
    lo = None if lo is None else min(lo, delta)
    hi = None if hi is None else max(hi, delta)
    return (lo, hi), "; ".join(notes)


def bisect_order_parameter(
    measure,
    lo,
    hi,
    seeds,
    d,
    k,
    m,
    *,
    level=ORDER_LEVEL,
    fwer=FWER,
    alpha=INTERVAL_ALPHA,
    rtol=0.05,
    max_evals=12,
    max_confirm=4,
    confirm_step=1.1,
    progress=None,
) -> CrossingEstimate:
    """Locate where the seed mean of ``measure(delta, seed)`` crosses its level (section 7.4).

    The level is :func:`order_level` over ``len(seeds) * (max_evals + max_confirm)`` spectra,
    so no null spectrum among all that may be evaluated reaches it, with probability at least
    ``1 - fwer``.  The ends are evaluated first (the mean must be below the level at ``lo``
    and at or above it at ``hi``, else ``found`` is False with the reason); then the bracket
    is halved geometrically until ``hi / lo <= 1 + rtol`` or ``max_evals`` evaluations.  Near
    the crossing no mean is significantly off the level, so up to ``max_confirm`` more
    evaluations walk out of the final bracket by factors ``confirm_step``, first upwards, then
    downwards, until the significant end of the interval is the next step out (or the search
    limit).  :func:`crossing_estimate` reads the estimate and interval off every evaluation.

    Parameters
    ----------
    measure : callable
        ``measure(delta, seed)``: the order parameter of one run (:func:`order_parameter`).
    lo, hi : float
        Search range, ``0 < lo < hi``.
    seeds : sequence of int
        Seeds evaluated at every ``delta``.
    d, k, m : int
        Dimension, number of hidden directions and width (the null law).
    level, fwer : float
        Stated level and family-wise error rate of the null (:func:`order_level`).
    alpha : float
        Two-sided level of the interval.
    rtol : float
        Relative width at which the bisection stops.
    max_evals : int
        Largest number of evaluated ``delta`` of the bisection.
    max_confirm : int
        Largest number of evaluations that confirm the ends of the interval.
    confirm_step : float
        Factor (> 1) between those evaluations.
    progress : callable, optional
        Called with a short text after each evaluation.

    Returns
    -------
    CrossingEstimate

    Examples
    --------
    A planted order parameter that jumps from 0 to 0.3 at ``delta = 3`` (d = 1000, k = 1,
    m = 2): the crossing is bracketed around 3.

    >>> import numpy as np
    >>> est = bisect_order_parameter(
    ...     lambda x, s: 0.3 if x >= 3 else 0.0, 1.5, 6.0, [0, 1, 2], 1000, 1, 2, rtol=0.02
    ... )
    >>> est.found, bool(est.bracket[0] < 3 <= est.bracket[1])
    (True, True)
    """
    lo, hi, seeds, rtol, max_evals = _check_search(lo, hi, seeds, rtol, max_evals)
    max_confirm = check_positive_int(max_confirm, "max_confirm", minimum=0)
    confirm_step = check_positive_float(confirm_step, "confirm_step")
    if confirm_step <= 1:
        raise ValueError(f"confirm_step must be > 1; got {confirm_step}")
    n_draws = len(seeds) * (max_evals + max_confirm)
    crit = order_level(d, k, m, n_draws, level, fwer)
    evals = []

    def at_or_above(x):
        values = [float(measure(x, s)) for s in seeds]
        evals.append((float(x), values))
        if progress is not None:
            progress(f"delta = {x:.4g}: order parameter {np.mean(values):.3g} (level {crit:.3g})")
        return float(np.mean(values)) >= crit

    limits = (lo, hi)
    if not at_or_above(lo) and at_or_above(hi):
        while hi / lo > 1 + rtol and len(evals) < max_evals:
            mid = float(np.sqrt(lo * hi))
            if at_or_above(mid):
                hi = mid
            else:
                lo = mid
        _confirm_ends(at_or_above, evals, crit, alpha, limits, confirm_step, max_confirm)
    null = overlap_null_level(d, k, m, 1.0 - fwer, n_draws)
    est = crossing_estimate(evals, crit, alpha)
    return replace(est, stated_level=float(level), null_level=null, fwer=float(fwer))


def _confirm_ends(evaluate, evals, level, alpha, limits, step, budget) -> None:
    """Walk out of the bracket by factors ``step`` until each end of the interval of
    :func:`crossing_estimate` is the evaluation next to the walk, within ``budget`` calls of
    ``evaluate`` (docs/theory.md section 7.4, step 3 of the estimate)."""
    est = crossing_estimate(evals, level, alpha)
    if not est.found or est.interval is None:
        return
    for side in (1, 0):  # the upper end first: the seeds spread more above the crossing
        x = est.bracket[side]
        while budget > 0:
            now = crossing_estimate(evals, level, alpha)
            if now.interval is None:
                return
            end = limits[side] if now.interval[side] is None else now.interval[side]
            x = x * step if side else x / step
            if (x >= end) if side else (x <= end):
                break
            evaluate(x)
            budget -= 1


@dataclass(frozen=True, kw_only=True)
class TransitionEstimate:
    """A threshold in ``delta`` located by bisection on simulations (:func:`bisect_transition`).

    ``delta`` is the geometric midpoint of ``bracket``, the last bisection bracket (seed
    majority "no" at its lower end, "yes" at its upper end).  ``interval`` is the confidence
    interval of the significance rule at one-sided level ``alpha``.  ``found`` is False, with a
    ``reason``, when the search range does not bracket the transition; ``delta`` is then
    ``nan``, and ``None`` in :meth:`as_dict` (never a made-up number).  ``evaluations`` lists ``(delta, yes, seeds)``.
    """

    delta: float
    bracket: tuple
    interval: tuple
    alpha: float
    found: bool
    reason: str = ""
    evaluations: list = field(default_factory=list)

    def as_dict(self) -> dict:
        """The estimate as plain values; ``None`` (with ``reason``) where there is no number."""
        if not self.found:
            delta, bracket, interval = None, None, None
        else:
            delta, bracket, interval = self.delta, list(self.bracket), list(self.interval)
        return {
            "delta": delta,
            "bracket": bracket,
            "interval": interval,
            "alpha": self.alpha,
            "found": self.found,
            "reason": self.reason,
            "evaluations": [list(e) for e in self.evaluations],
        }


def _binomial_tails(yes, total):
    """``P(X >= yes)`` and ``P(X <= yes)`` for ``X ~ Bin(total, 1/2)``."""
    return float(binom.sf(yes - 1, total, 0.5)), float(binom.cdf(yes, total, 0.5))


def significance_interval(evaluations, alpha, limits) -> tuple:
    """The interval between the nearest significant "no" below and significant "yes" above.

    ``evaluations`` are ``(delta, yes, seeds)``.  The probability ``p(delta)`` of "yes" is
    assumed non-decreasing in ``delta`` (a monotone transition), which lets evaluations be
    pooled: if ``p(delta) >= 1/2``, every ``delta' >= delta`` has ``p >= 1/2`` too, so the "yes"
    count pooled over the evaluations in ``[delta, delta_2]`` is at least ``Bin(N, 1/2)``
    distributed.  ``delta`` is significantly "no" (the threshold lies above it) when, for some
    ``delta_2 >= delta``, ``P(Bin(N, 1/2) <= yes) <= alpha`` for that pooled count; it is
    significantly "yes" when, for some ``delta_1 <= delta``, ``P(Bin(N, 1/2) >= yes) <= alpha``
    over ``[delta_1, delta]``.  The threshold lies above every significant "no" and below every
    significant "yes"; a side with none is open up to ``limits``.  When the two sides cross (a
    "yes" below a "no": not monotone at this size), the interval spans both.
    """
    ev = sorted((float(x), int(y), int(s)) for x, y, s in evaluations)
    no, yes_ = [], []
    for i, (x, _, _) in enumerate(ev):
        if any(_pooled(ev[i : j + 1])[1] <= alpha for j in range(i, len(ev))):
            no.append(x)
        if any(_pooled(ev[j : i + 1])[0] <= alpha for j in range(i + 1)):
            yes_.append(x)
    lo = max(no) if no else limits[0]
    hi = min(yes_) if yes_ else limits[1]
    return (min(lo, hi), max(lo, hi))


def _pooled(window):
    """The two binomial tails of the "yes" count pooled over ``window``."""
    return _binomial_tails(sum(w[1] for w in window), sum(w[2] for w in window))


def _check_search(lo, hi, seeds, rtol, max_evals):
    """The validated ``(lo, hi, seeds, rtol, max_evals)`` of a search in ``delta`` over seeds."""
    lo, hi = check_positive_float(lo, "lo"), check_positive_float(hi, "hi")
    if not lo < hi:
        raise ValueError(f"need lo < hi; got lo = {lo}, hi = {hi}")
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    rtol = check_positive_float(rtol, "rtol")
    max_evals = check_positive_int(max_evals, "max_evals", minimum=2)
    return lo, hi, seeds, rtol, max_evals


def bisect_transition(
    outcome, lo, hi, seeds, *, rtol=0.05, max_evals=12, alpha=0.1, progress=None
) -> TransitionEstimate:
    """Locate where ``outcome(delta, seed)`` switches from mostly False to mostly True.

    The ends are evaluated first: the seed majority must be "no" at ``lo`` and "yes" at ``hi``,
    otherwise ``found`` is False.  Then the bracket is halved geometrically (a tie counts as
    "yes") until ``hi / lo <= 1 + rtol`` or ``max_evals`` evaluations.  The confidence interval
    is :func:`significance_interval` over every evaluated ``delta``.  ``progress`` is called
    with a short text after each evaluation.  See docs/theory.md section 7.4.

    Parameters
    ----------
    outcome : callable
        ``outcome(delta, seed) -> bool``, e.g. "gradient descent learned ``Theta*``".
    lo, hi : float
        The search range, ``0 < lo < hi``.
    seeds : sequence of int
        The seeds evaluated at every ``delta``.
    rtol : float
        Relative width of the final bracket.
    max_evals : int
        Most evaluated ``delta`` (ends included).
    alpha : float
        One-sided level of the confidence interval.
    progress : callable, optional
        Called with a short text after each evaluation.

    Returns
    -------
    TransitionEstimate
        ``delta``, the last ``bracket``, the confidence ``interval`` and the evaluations;
        ``found`` is False (with a ``reason``) when ``[lo, hi]`` does not bracket the switch.

    Raises
    ------
    ValueError
        For ``lo >= hi``, empty ``seeds`` or invalid ``rtol`` / ``max_evals``.

    Examples
    --------
    A deterministic switch at ``delta = 2``:

    >>> import rmt
    >>> est = rmt.bisect_transition(lambda delta, seed: delta > 2.0, 1.0, 4.0, seeds=(0, 1, 2))
    >>> est.found, est.bracket[0] <= 2.0 <= est.bracket[1], round(est.delta, 1)
    (True, True, 2.0)
    """
    lo, hi, seeds, rtol, max_evals = _check_search(lo, hi, seeds, rtol, max_evals)
    evals = []

    def majority(x):
        yes = sum(bool(outcome(x, s)) for s in seeds)
        evals.append((float(x), yes, len(seeds)))
        if progress is not None:
            progress(f"delta = {x:.4g}: {yes}/{len(seeds)} yes")
        return 2 * yes >= len(seeds)

    limits = (lo, hi)
    if majority(lo):
        return _not_found(evals, alpha, limits, f"the majority is already 'yes' at delta = {lo:g}")
    if not majority(hi):
        return _not_found(evals, alpha, limits, f"the majority is still 'no' at delta = {hi:g}")
    while hi / lo > 1 + rtol and len(evals) < max_evals:
        mid = float(np.sqrt(lo * hi))
        if majority(mid):
            hi = mid
        else:
            lo = mid
    interval = significance_interval(evals, alpha, limits)
    return TransitionEstimate(
        delta=float(np.sqrt(lo * hi)),
        bracket=(lo, hi),
        interval=interval,
        alpha=alpha,
        found=True,
        reason="",
        evaluations=evals,
    )


def _not_found(evals, alpha, limits, reason) -> TransitionEstimate:
    nan = float("nan")
    return TransitionEstimate(
        delta=nan,
        bracket=(nan, nan),
        interval=(nan, nan),
        alpha=alpha,
        found=False,
        reason=reason,
        evaluations=evals,
    )
