"""Free-probability engine: operator-valued Marchenko-Pastur, edges, outliers, BBP thresholds.

docs/theory.md sections 3-5.  The law of ``(zhat, D)`` is a ``SpikeLaw``; every solver takes it with
``delta = n/d``.

- ``stieltjes(law, delta, zeta)``: ``G(zeta)`` (section 3, (MP)).
- ``bulk_density(law, delta, x)``: density of the bulk and the atom at 0.
- ``bulk_edges(law, delta)``: ``(lo, hi)`` from the folds of the real branch.
- ``outliers(law, delta, side)``: outlier eigenvalues and their overlaps (section 4).
- ``bbp_threshold(law, side)``: the ``delta`` at which an outlier with ``Theta*`` overlap leaves.
- ``delta_alg(model)``: the algorithmic threshold (section 5).

Laws (``SpikeLaw``) come from ``from_network`` (Gaussian law at a data-independent ``W``),
``from_hessian`` (plug-in law of a sample) or ``spectral`` (``m = 1``, ``D = T(y)``).

What the results say beyond numbers:

- ``law.unbounded = (below, above)``: ``D`` is unbounded on that side (docs/theory.md section 4), so
  the edge is infinite, ``outliers`` returns an empty list with ``.reason`` and
  ``bbp_threshold`` returns ``found=False, delta=inf`` with the reason.
- ``BulkEdges.lo_kind / hi_kind``: ``"fold"`` (square-root edge, exact to solver tolerance),
  ``"boundary"`` (cut at an exact range of ``D`` given in ``d_bounds``, for suprema reached only
  at infinity), ``"atom"``, ``"pole"`` (the pole of an extreme node that attains the extreme of
  ``D``: the edge to about the square root of its weight), ``"undetermined"`` (``nan``, with
  ``BulkEdges.reason``: the branch ran into the pole of the largest node short of the extreme of
  ``D``, so the nodes' reach, not the law, would set the edge; give ``d_bounds``/``T_bounds``).
  Outliers and thresholds on an undetermined side raise ``EdgeNotDetermined``.
- Solvers raise ``ConvergenceError`` rather than return an unconverged number.

Known limitations: a non-smooth network (Huber loss, ReLU) with one coordinate besides
``Theta*`` and one unit with a monotone activation gets the aligned rule (every kink a panel
edge, spectrally accurate).  Other such laws (a quadratic unit, or ``m >= 2`` at a point of
rank 1) are integrated by Gauss-Hermite in that coordinate, where the inner integrals have
square-root singularities, so the accuracy is algebraic (its size: docs/theory.md section
3.9); ``nodes="adaptive"`` is exact there, but slow.  With
two such coordinates the nested law is kept only where a randomised QMC law agrees with it;
noisy or ``k >= 2`` targets get randomised QMC nodes (scrambled Sobol) with their ``stderr``.
"""

from rmt.freeprob import closed_forms  # noqa: F401
from rmt.freeprob.alg import DeltaAlg, delta_alg  # noqa: F401
from rmt.freeprob.bbp import BBPThreshold, bbp_threshold  # noqa: F401
from rmt.freeprob.edges import BulkEdges  # noqa: F401
from rmt.freeprob.law import SpikeLaw  # noqa: F401
from rmt.freeprob.mp import ConvergenceError, EdgeNotDetermined  # noqa: F401
from rmt.freeprob.nodes import adaptive_gauss_1d  # noqa: F401
from rmt.freeprob.outliers import Outlier, Outliers, outliers  # noqa: F401
from rmt.freeprob.spectrum import BulkDensity, StieltjesResult, bulk_density, bulk_edges, stieltjes  # noqa: F401
