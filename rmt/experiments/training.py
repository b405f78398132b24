"""The first phase of gradient descent, then the escape from the plateau (docs/theory.md sec. 6)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..points import EscapeTime, TrainedPoint, TrainResult, predicted_escape_time
from .simulation import simulate_point


@dataclass(frozen=True)
class TrainingRun:
    """Result of :func:`training_run`.

    ``result`` is the :class:`rmt.TrainResult`; ``lambda_min`` the smallest Hessian eigenvalue
    at the phase end; ``predicted`` the ``log(d)/|lambda_min|`` escape delay (``None`` unless
    ``lambda_min < 0``) and ``predicted_step`` the step it predicts for the escape (``None``
    without a prediction or a detected phase end); ``curves`` the per-step loss, gradient norm
    and overlap.
    """

    result: TrainResult
    lambda_min: float
    predicted: EscapeTime | None
    predicted_step: float | None
    curves: dict


def training_run(config, progress=False) -> TrainingRun:
    """Gradient descent from a small random start at the first ``delta`` and seed of ``config``
    (``config.train_steps`` at most, then ``config.continue_steps`` to see the escape)."""
    from ..eigen import extreme_eigs

    point = TrainedPoint.from_config(config, None, None)
    point = replace(point, continue_steps=config.continue_steps, progress=progress)
    sim = simulate_point(config, point, config.deltas[0], config.seeds[0])
    res = sim.record
    eig = extreme_eigs(sim.hessian, k=1, which="smallest", method=config.method, rng=sim.rng)
    lam = float(eig.values[0])
    pred = predicted_escape_time(lam, sim.data.d, res.lr) if lam < 0 else None
    step = None if pred is None or res.phase_end_step is None else res.phase_end_step + pred.steps
    curves = {
        "step": np.arange(len(res.loss)),
        "loss": res.loss,
        "grad_norm": res.grad_norm,
        "overlap": res.overlap,
    }
    return TrainingRun(res, lam, pred, step, curves)
