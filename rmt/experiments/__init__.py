"""The experiments layer: the science of each command, returned as data (docs/theory.md 3-8).

Functions here compute and return dataclasses or tidy rows.  Four of them also append each
finished unit of work to a resumable table of the result store (:mod:`.store`), so that an
interrupted run loses nothing: :func:`run_sweep`, :func:`.learning.run_learn`,
:func:`.phase_diagram.phase_diagram` and :func:`.grokking.grokking`.  The commands (:mod:`rmt.app.commands`) call these
functions and write the figures, summaries and JSON.

- :mod:`.config`: :class:`~.config.RunConfig`, every option of the commands.
- :mod:`.store`: tidy CSV tables that resume, JSON files, manifests.
- :mod:`.simulation`: sample -> weights -> Hessian at one ``(delta, seed)``.
- :mod:`.theory`: the Gaussian law at a point and its predictions on a grid of ``delta``.
- :mod:`.spectra`: full spectra against the predicted density.
- :mod:`.sweep`: extreme eigenpairs against the predictions over ``(delta, seed)``.
- :mod:`.threshold_table`: ``delta_pop`` of one configuration and over a table of them.
- :mod:`.training`: the first phase of gradient descent and the escape from the plateau.
- :mod:`.learning`: what gradient descent learns across ``delta``; the simulated ``delta_NN``.
- :mod:`.phase_diagram`: the asymptotic ``delta_NN`` over a grid of settings.
- :mod:`.grokking`: the plateau length of gradient descent, measured and predicted from the
  DMFT spectrum at ``W1``.
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
