"""rmt: random-matrix theory of two-layer network Hessians.

The public API, grouped by role.
"""
# ruff: noqa: E402, F401, I001  (the environment is set before the kernels load; grouped by role)

__version__ = "0.1.0"

import os as _os

# Numba's OpenMP threads otherwise spin after each parallel kernel and slow the LAPACK and
# OpenBLAS calls that follow by 10-50x on a 2-core machine.  But a sleeping thread takes
# 50-100 us to wake (on this virtual machine), and an iterative solver starts several parallel
# kernels per step: a short spin first (10 000 rounds, 0.2-0.5 ms) keeps them 3 us apart and
# leaves BLAS alone (benchmarks/RESULTS.md, "Waking Numba's threads").  A user's own setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_os.environ.setdefault("GOMP_SPINCOUNT", "10000")

# -- data and network (THEORY.md sections 1-2) ----------------------------------------------
from .models import TARGETS, Dataset, MultiIndexModel
from .network import ACTIVATIONS, LOSSES, TwoLayerNet
from .hessian import Hessian

# -- extreme eigenpairs and spectral density (issue 3) --------------------------------------
from .eigen import (
    EigResult,
    NoConvergenceError,
    SpectralDensity,
    extreme_eigs,
    overlaps,
    spectral_density,
)

# -- free probability (issue 4) ---------------------------------------------------------------
from . import ensembles
from .freeprob import (
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

# -- points, thresholds and experiments (issue 5) ---------------------------------------------
from .points import (
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
from .thresholds import ThresholdResult, delta_nn
from .config import RunConfig, parse_deltas
from .experiments import run_point, run_sweep

# -- scale-out (issue 6) -----------------------------------------------------------------------
from .streaming import StreamingHessian
from .distributed import DistributedHessian, TasksFailedError, run_tasks
