"""rmt: random-matrix theory of two-layer network Hessians.

The public API, grouped by role.
"""

__version__ = "0.1.0"

import os as _os

# Numba's OpenMP threads otherwise spin after each parallel kernel and slow the LAPACK and
# OpenBLAS calls that follow by 10-50x on a 2-core machine.  A user's own setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# -- data and network (THEORY.md sections 1-2) ----------------------------------------------
# -- free probability (issue 4) ---------------------------------------------------------------
from . import ensembles  # noqa: F401
from .config import RunConfig, parse_deltas  # noqa: F401
from .distributed import DistributedHessian, TasksFailedError, run_tasks  # noqa: F401

# -- extreme eigenpairs and spectral density (issue 3) --------------------------------------
from .eigen import (  # noqa: F401
    EigResult,
    NoConvergenceError,
    SpectralDensity,
    extreme_eigs,
    overlaps,
    spectral_density,
)
from .experiments import run_point, run_sweep  # noqa: F401
from .freeprob import (  # noqa: F401
    BBPThreshold,
    BulkDensity,
    BulkEdges,
    ConvergenceError,
    DeltaAlg,
    Outlier,
    Outliers,
    SpikeLaw,
    StieltjesResult,
    bbp_threshold,
    bulk_density,
    bulk_edges,
    closed_forms,
    delta_alg,
    outliers,
    stieltjes,
)
from .hessian import Hessian  # noqa: F401
from .models import TARGETS, Dataset, MultiIndexModel  # noqa: F401
from .network import ACTIVATIONS, LOSSES, TwoLayerNet  # noqa: F401

# -- points, thresholds and experiments (issue 5) ---------------------------------------------
from .points import (  # noqa: F401
    EscapeTime,
    PointSpec,
    TrainResult,
    loss_and_grad_fused,
    population_point,
    population_risk,
    predicted_escape_time,
    theta_overlap,
    train_first_phase,
)

# -- scale-out (issue 6) -----------------------------------------------------------------------
from .streaming import StreamingHessian  # noqa: F401
from .thresholds import ThresholdResult, delta_nn  # noqa: F401
