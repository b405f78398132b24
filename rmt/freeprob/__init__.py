"""Free-probability engine: operator-valued Marchenko-Pastur, edges, outliers, thresholds.

THEORY.md sections 3-5.  The law of ``(zhat, D)`` is a ``SpikeLaw``; every solver takes it with
``delta = n/d``.

- ``stieltjes(law, delta, zeta)``: ``G(zeta)`` (section 3, (MP)).
- ``bulk_density(law, delta, x)``: density of the bulk and the atom at 0.
- ``bulk_edges(law, delta)``: ``(lo, hi)`` from the folds of the real branch.
- ``outliers(law, delta, side)``: outlier eigenvalues and their overlaps (section 4).
- ``bbp_threshold(law, side)``: the ``delta`` at which an outlier with ``Theta*`` overlap leaves.
- ``delta_alg(model)``: the algorithmic threshold (section 5).
"""

from . import closed_forms  # noqa: F401
from .alg import DeltaAlg, delta_alg  # noqa: F401
from .edges import BulkEdges  # noqa: F401
from .law import SpikeLaw  # noqa: F401
from .mp import ConvergenceError  # noqa: F401
from .nodes import adaptive_gauss_1d  # noqa: F401
from .outliers import Outlier, Outliers, outliers  # noqa: F401
from .spectrum import BulkDensity, StieltjesResult, bulk_density, bulk_edges, stieltjes  # noqa: F401
from .thresholds import BBPThreshold, bbp_threshold  # noqa: F401
