"""The experiments layer: theory next to simulation, returned as data (docs/theory.md sections 3-6).

Nothing here writes a file, except :func:`run_sweep`, whose resumable table and manifest let an
interrupted sweep continue.  The commands (:mod:`rmt.app.commands`) call these functions and write
the tables, figures and JSON.

- :mod:`.simulation`: sample -> weights -> Hessian at one ``(delta, seed)``.
- :mod:`.theory`: the Gaussian law at a point and its predictions on a grid of ``delta``.
- :mod:`.spectra`: full spectra against the predicted density.
- :mod:`.sweep`: extreme eigenpairs against the predictions over ``(delta, seed)``.
- :mod:`.threshold_table`: ``delta_NN`` of one configuration and over a table of them.
- :mod:`.training`: the first phase of gradient descent and the escape from the plateau.
"""

from rmt.experiments.simulation import Simulation, prepare_point, simulate_point
from rmt.experiments.spectra import (
    DENSE_LIMIT,
    DENSITY_POINTS,
    check_dense,
    spectrum_panel,
    spectrum_panels,
)
from rmt.experiments.sweep import (
    SWEEP_COLUMNS,
    SWEEP_KEY,
    SweepTheory,
    run_point,
    run_sweep,
    sweep_theory,
)
from rmt.experiments.theory import point_law, theory_at, theory_curve
from rmt.experiments.threshold_table import (
    TABLE_COLUMNS,
    TABLE_CONFIGS,
    threshold_summary,
    threshold_table,
)
from rmt.experiments.training import TrainingRun, training_run

__all__ = [
    "DENSE_LIMIT",
    "DENSITY_POINTS",
    "SWEEP_COLUMNS",
    "SWEEP_KEY",
    "TABLE_COLUMNS",
    "TABLE_CONFIGS",
    "Simulation",
    "SweepTheory",
    "TrainingRun",
    "check_dense",
    "point_law",
    "prepare_point",
    "run_point",
    "run_sweep",
    "simulate_point",
    "spectrum_panel",
    "spectrum_panels",
    "sweep_theory",
    "theory_at",
    "theory_curve",
    "threshold_summary",
    "threshold_table",
    "training_run",
]
