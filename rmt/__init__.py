"""rmt: random-matrix theory of two-layer network Hessians.

When does a two-layer network trained by gradient descent on ``n = delta d`` Gaussian samples
learn a hidden low-dimensional feature?  The public API, grouped by the layers of the package
(docs/architecture.md): the problem, the operators on it, their spectra, the theory of those
spectra, the dynamics of training, the thresholds, and the experiments on top.
"""

import importlib.metadata

from rmt.dynamics.descent import GDRun, Phases, PlateauRule, gradient_descent, segment_phases
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
from rmt.dynamics.escape import EscapePrediction, EscapeTime, predict_escape, predicted_escape_time
from rmt.eigen import (
    EigResult,
    NoConvergenceError,
    SpectralDensity,
    extreme_eigs,
    overlaps,
    spectral_density,
)
from rmt.experiments import run_point, run_sweep, simulate_point
from rmt.experiments.config import RunConfig, parse_deltas
from rmt.experiments.grokking import (
    GrokkingDelay,
    grokking,
    outlier_lifetime,
    plateau_run,
    row_escape,
)
from rmt.experiments.learning import learn_point, run_learn, trained_thresholds
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
from rmt.freeprob.plugin import cavity_self_term, plugin_law
from rmt.kernels.threads import (
    ThreadSettings,
    adaptive_threads,
    choose_threads,
    configure_threads,
    set_num_threads,
)
from rmt.operators.distributed import DistributedHessian, TasksFailedError, run_tasks
from rmt.operators.hessian import Hessian
from rmt.operators.streaming import RowData, StreamingHessian
from rmt.problem import ensembles
from rmt.problem.models import TARGETS, Dataset, MultiIndexModel
from rmt.problem.network import ACTIVATIONS, LOSSES, TwoLayerNet
from rmt.thresholds.asymptotic import DMFTEvaluation, DMFTThreshold, dmft_delta_nn, dmft_margin
from rmt.thresholds.points import (
    POINT_KINDS,
    GivenPoint,
    Point,
    PointSpec,
    PopulationPoint,
    TrainedPoint,
    ZeroPoint,
    make_point,
    population_point,
    population_risk,
    register_point,
    theta_overlap,
)
from rmt.thresholds.population import ThresholdResult, population_threshold
from rmt.thresholds.statistics import (
    bisect_order_parameter,
    bisect_transition,
    descent_outlier_decision,
    order_parameter,
)

__version__ = importlib.metadata.version("rmt")

__all__ = [
    # -- the problem: data models, the network, the classical spiked ensembles (theory 1-2)
    "TARGETS",
    "Dataset",
    "MultiIndexModel",
    "ACTIVATIONS",
    "LOSSES",
    "TwoLayerNet",
    "ensembles",
    # -- operators: the first-layer Hessian, in memory, streamed and distributed (theory 2)
    "Hessian",
    "RowData",
    "StreamingHessian",
    "DistributedHessian",
    "TasksFailedError",
    "run_tasks",
    # -- spectra: extreme eigenpairs and the spectral density
    "EigResult",
    "NoConvergenceError",
    "SpectralDensity",
    "extreme_eigs",
    "overlaps",
    "spectral_density",
    # -- free probability: bulk, outliers, BBP thresholds, delta_alg (theory 3-5)
    "BBPThreshold",
    "BulkDensity",
    "BulkEdges",
    "ConvergenceError",
    "DeltaAlg",
    "Outlier",
    "Outliers",
    "SpikeLaw",
    "StieltjesResult",
    "bbp_threshold",
    "bulk_density",
    "bulk_edges",
    "closed_forms",
    "delta_alg",
    "outliers",
    "stieltjes",
    "cavity_self_term",
    "plugin_law",
    # -- dynamics: gradient descent and its phases, the escape, the DMFT (theory 7-8)
    "GDRun",
    "Phases",
    "PlateauRule",
    "gradient_descent",
    "segment_phases",
    "EscapePrediction",
    "EscapeTime",
    "predict_escape",
    "predicted_escape_time",
    "DMFTHessian",
    "DMFTReplicas",
    "DMFTResult",
    "dmft_gd",
    "dmft_hessian",
    "dmft_law",
    "dmft_replicas",
    "theta_margin",
    # -- thresholds: points, delta_pop, the asymptotic and simulated delta_NN (theory 6-8)
    "POINT_KINDS",
    "GivenPoint",
    "Point",
    "PointSpec",
    "PopulationPoint",
    "TrainedPoint",
    "ZeroPoint",
    "make_point",
    "population_point",
    "population_risk",
    "register_point",
    "theta_overlap",
    "ThresholdResult",
    "population_threshold",
    "DMFTEvaluation",
    "DMFTThreshold",
    "dmft_delta_nn",
    "dmft_margin",
    "bisect_order_parameter",
    "bisect_transition",
    "descent_outlier_decision",
    "order_parameter",
    # -- experiments: one configuration through the pipeline, returned as data
    "RunConfig",
    "parse_deltas",
    "run_point",
    "run_sweep",
    "simulate_point",
    "learn_point",
    "run_learn",
    "trained_thresholds",
    "GrokkingDelay",
    "grokking",
    "outlier_lifetime",
    "plateau_run",
    "row_escape",
    # -- threads: explicit settings, no process-wide side effect at import
    "ThreadSettings",
    "adaptive_threads",
    "choose_threads",
    "configure_threads",
    "set_num_threads",
]
