"""rmt: random-matrix theory of two-layer network Hessians.

The public API, grouped by role.
"""
# ruff: noqa: E402, F401, I001  (imports follow __version__; grouped by role)

__version__ = "0.1.0"

# -- thread settings: explicit, no process-wide side effect at import (rmt/kernels/threads.py) -------
from rmt.kernels.threads import (
    ThreadSettings,
    adaptive_threads,
    choose_threads,
    configure_threads,
    set_num_threads,
)

# -- data and network (docs/theory.md sections 1-2) ----------------------------------------------
from rmt.problem.models import TARGETS, Dataset, MultiIndexModel
from rmt.problem.network import ACTIVATIONS, LOSSES, TwoLayerNet
from rmt.operators.hessian import Hessian

# -- extreme eigenpairs and spectral density ------------------------------------------------
from rmt.eigen import (
    EigResult,
    NoConvergenceError,
    SpectralDensity,
    extreme_eigs,
    overlaps,
    spectral_density,
)

# -- free probability -------------------------------------------------------------------------
from rmt.problem import ensembles
from rmt.freeprob import (
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

# -- points, thresholds and experiments -------------------------------------------------------
from rmt.thresholds.points import (
    POINT_KINDS,
    EscapeTime,
    GivenPoint,
    Point,
    PointSpec,
    PopulationPoint,
    TrainedPoint,
    ZeroPoint,
    make_point,
    population_point,
    population_risk,
    predicted_escape_time,
    register_point,
    theta_overlap,
)
from rmt.thresholds.population import ThresholdResult, population_threshold
from rmt.experiments.config import RunConfig, parse_deltas
from rmt.experiments import run_point, run_sweep, simulate_point

# -- the second phase: gradient descent, W1, the learning transition (docs/theory.md sec. 7) --
from rmt.dynamics.descent import GDRun, Phases, PlateauRule, gradient_descent, segment_phases
from rmt.dynamics.escape import EscapePrediction, predict_escape
from rmt.dynamics.dmft import (
    DMFTHessian,
    DMFTReplicas,
    DMFTResult,
    dmft_gd,
    dmft_hessian,
    dmft_law,
    dmft_replicas,
    theta_margin,
)
from rmt.thresholds.asymptotic import DMFTEvaluation, DMFTThreshold, dmft_delta_nn, dmft_margin
from rmt.thresholds.statistics import (
    bisect_order_parameter,
    bisect_transition,
    descent_outlier_decision,
    order_parameter,
)
from rmt.experiments.learning import learn_point, run_learn, trained_thresholds
from rmt.freeprob.plugin import cavity_self_term, plugin_law

# -- scale-out ---------------------------------------------------------------------------------
from rmt.operators.streaming import RowData, StreamingHessian
from rmt.operators.distributed import DistributedHessian, TasksFailedError, run_tasks
