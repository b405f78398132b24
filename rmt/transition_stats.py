"""Statistical decisions for thresholds measured by simulation (docs/theory.md section 7).

Two questions are asked of simulations at a given ``d`` and set of seeds:

* does the Hessian at the post-first-phase point ``W1`` have a *negative outlier carrying
  Theta**?  (:func:`descent_outlier_decision`, one seed at a time), and
* at which ``delta`` does the answer switch from mostly "no" to mostly "yes"?
  (:func:`bisect_transition`, any yes/no outcome that grows with ``delta``, e.g. also "gradient
  descent learned Theta*").

Both are stated rules, documented here and in the theory document, so that an estimate can be
reproduced and its interval read for what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validation import as_float_array, check_positive_float, check_positive_int

#: one-sided level of the null quantile that an overlap must exceed
OVERLAP_LEVEL = 0.999
#: an outlier gap must exceed this multiple of the median spacing of the eigenvalues above it
GAP_FACTOR = 2.5


def overlap_null_level(d, k, m, level=OVERLAP_LEVEL) -> float:
    """Quantile ``level`` of the squared overlap of a random unit vector with ``R^m (x) Theta*``.

    A delocalised (bulk) unit vector of ``R^{m d}`` behaves like a uniformly random one, whose
    squared projection on a fixed ``r = m k`` dimensional subspace is ``Beta(r/2, (N - r)/2)``
    with ``N = m d`` (mean ``k/d``).
    """
    from scipy.stats import beta

    d, k, m = (check_positive_int(v, name) for v, name in ((d, "d"), (k, "k"), (m, "m")))
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}")
    if k >= d:
        raise ValueError(f"k must be < d; got k = {k}, d = {d}")
    r, N = m * k, m * d
    return float(beta.ppf(level, r / 2.0, (N - r) / 2.0))


@dataclass(frozen=True)
class OutlierDecision:
    """Whether the bottom of a spectrum holds a negative outlier carrying ``Theta*``.

    ``n_outliers`` eigenvalues lie below the largest relative gap (0 when no gap is large
    enough); ``index`` is the descent outlier among them (lowest eigenvalue that is negative and
    whose overlap exceeds ``overlap_null``), ``None`` when there is none.  ``gap_ratio`` is that
    gap over the median spacing of the eigenvalues above it.
    """

    has_outlier: bool
    index: int | None
    value: float | None
    overlap: float | None
    n_outliers: int
    gap_ratio: float
    overlap_null: float
    reason: str


def descent_outlier_decision(
    values, overlaps, d, k, m, *, gap_factor=GAP_FACTOR, level=OVERLAP_LEVEL, max_outliers=None
) -> OutlierDecision:
    """Decide from the ``q`` smallest eigenvalues whether a negative ``Theta*`` outlier exists.

    The rule (docs/theory.md section 7.4), for ascending ``values`` ``l_1 <= ... <= l_q`` and the
    squared ``Theta*`` overlaps of their eigenvectors:

    1. *Separation.*  For ``j = 1..J`` (``J = max_outliers``, default ``m k``, and at most
       ``q - 3``) the gap ``l_{j+1} - l_j`` is compared with the median spacing of
       ``l_{j+1}, ..., l_q``, the soft-edge eigenvalues above it.  The largest ratio wins; if it
       exceeds ``gap_factor``, ``l_1..l_j`` are outliers.  Edge eigenvalues of a bulk are spaced
       like ``j^{2/3} d^{-2/3}``, so their first gap is about 1.5 median spacings: a factor 4 is
       beyond the edge fluctuations.
    2. *Overlap.*  An outlier carries ``Theta*`` when its overlap exceeds
       :func:`overlap_null_level` (a delocalised eigenvector's null quantile).
    3. *Descent.*  It is a descent direction when its eigenvalue is below 0.
    """
    lam = as_float_array(values, "values", ndim=1)
    ov = as_float_array(overlaps, "overlaps", ndim=1)
    if lam.shape != ov.shape:
        raise ValueError(f"values and overlaps need one entry each; got {lam.shape}, {ov.shape}")
    if lam.size < 4:
        raise ValueError(f"need at least 4 eigenvalues to judge separation; got {lam.size}")
    if np.any(np.diff(lam) < 0):
        raise ValueError("values must be sorted ascending")
    gap_factor = check_positive_float(gap_factor, "gap_factor")
    null = overlap_null_level(d, k, m, level)
    J = m * k if max_outliers is None else check_positive_int(max_outliers, "max_outliers")
    J = min(J, lam.size - 3)
    ratios = []
    for j in range(1, J + 1):
        spacing = float(np.median(np.diff(lam[j:])))
        gap = float(lam[j] - lam[j - 1])
        ratios.append(gap / spacing if spacing > 0 else np.inf)
    best = int(np.argmax(ratios))
    ratio = float(ratios[best])
    n_out = best + 1 if ratio > gap_factor else 0
    for i in range(n_out):
        if ov[i] > null and lam[i] < 0:
            return OutlierDecision(True, i, float(lam[i]), float(ov[i]), n_out, ratio, null, "")
    if n_out == 0:
        reason = f"no gap beyond {gap_factor:g} median spacings (largest {ratio:.2f})"
    elif not np.any(ov[:n_out] > null):
        reason = f"the {n_out} outlier(s) carry no Theta* overlap above {null:.3g}"
    else:
        reason = "the outlier carrying Theta* is not negative"
    return OutlierDecision(False, None, None, None, n_out, ratio, null, reason)


@dataclass(frozen=True)
class TransitionEstimate:
    """A threshold in ``delta`` located by bisection on simulations (:func:`bisect_transition`).

    ``delta`` is the geometric midpoint of ``bracket``, the last bisection bracket (seed
    majority "no" at its lower end, "yes" at its upper end).  ``interval`` is the confidence
    interval of the significance rule at one-sided level ``alpha``.  ``found`` is False, with a
    ``reason``, when the search range does not bracket the transition; ``delta`` is then
    ``nan`` (never a made-up number).  ``evaluations`` lists ``(delta, yes, seeds)``.
    """

    delta: float
    bracket: tuple
    interval: tuple
    alpha: float
    found: bool
    reason: str = ""
    evaluations: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "delta": self.delta,
            "bracket": list(self.bracket),
            "interval": list(self.interval),
            "alpha": self.alpha,
            "found": self.found,
            "reason": self.reason,
            "evaluations": [list(e) for e in self.evaluations],
        }


def _binomial_tails(yes, total):
    """``P(X >= yes)`` and ``P(X <= yes)`` for ``X ~ Bin(total, 1/2)``."""
    from scipy.stats import binom

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


def bisect_transition(
    outcome, lo, hi, seeds, *, rtol=0.05, max_evals=12, alpha=0.1, progress=None
) -> TransitionEstimate:
    """Locate where ``outcome(delta, seed)`` switches from mostly False to mostly True.

    The ends are evaluated first: the seed majority must be "no" at ``lo`` and "yes" at ``hi``,
    otherwise ``found`` is False.  Then the bracket is halved geometrically (a tie counts as
    "yes") until ``hi / lo <= 1 + rtol`` or ``max_evals`` evaluations.  The confidence interval
    is :func:`significance_interval` over every evaluated ``delta``.  ``progress`` is called
    with a short text after each evaluation.
    """
    lo, hi = check_positive_float(lo, "lo"), check_positive_float(hi, "hi")
    if not lo < hi:
        raise ValueError(f"need lo < hi; got lo = {lo}, hi = {hi}")
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    rtol = check_positive_float(rtol, "rtol")
    max_evals = check_positive_int(max_evals, "max_evals", minimum=2)
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
    return TransitionEstimate(float(np.sqrt(lo * hi)), (lo, hi), interval, alpha, True, "", evals)


def _not_found(evals, alpha, limits, reason) -> TransitionEstimate:
    nan = float("nan")
    return TransitionEstimate(nan, (nan, nan), (nan, nan), alpha, False, reason, evals)
