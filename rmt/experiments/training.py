"""One gradient-descent run with its two phases, the Hessian at the plateau and the predicted
escape (docs/theory.md section 7)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rmt.dynamics.escape import predict_escape
from rmt.experiments.learning import LEARNED_OVERLAP, hessian_at_plateau, run_descent
from rmt.kernels.threads import adaptive_threads


@dataclass(frozen=True, kw_only=True)
class TrainingRun:
    """Result of :func:`training_run`.

    ``run`` is the :class:`rmt.dynamics.descent.GDRun` (curves, ``W1``, plateau and escape steps);
    ``eigs`` the bottom eigenpairs of the Hessian at ``W1`` and ``overlaps`` their ``Theta*``
    overlaps; ``decision`` the :class:`rmt.thresholds.statistics.OutlierDecision` there;
    ``predicted`` the :class:`rmt.dynamics.escape.EscapePrediction` (``None`` without a plateau), and
    ``predicted_step`` the step it predicts for the escape (``None`` without one); ``curves`` the
    per-step train and test loss, gradient norm and overlap.
    """

    run: object
    eigs: object
    overlaps: np.ndarray
    decision: object
    predicted: object
    predicted_step: float | None
    curves: dict


@adaptive_threads
def training_run(config, progress=False) -> TrainingRun:
    """Gradient descent at the first ``delta`` and seed of ``config`` for
    ``config.train_steps + config.continue_steps`` steps, with a held-out test set."""
    total = replace(config, train_steps=config.train_steps + config.continue_steps)
    data, run, rng = run_descent(total, config.deltas[0], config.seeds[0], progress=progress)
    curves = {
        "step": np.arange(run.loss.size),
        "train_loss": run.loss,
        "test_loss": run.test_loss,
        "grad_norm": run.grad_norm,
        "overlap": run.overlap,
    }
    if run.W1 is None:
        return TrainingRun(
            run=run,
            eigs=None,
            overlaps=np.array([]),
            decision=None,
            predicted=None,
            predicted_step=None,
            curves=curves,
        )
    H, res, ov, dec = hessian_at_plateau(config, data, run, rng)
    grad = H.net.loss_and_grad(data, run.W1, config.weight_decay)[1]
    pred = predict_escape(
        res.values, res.vectors, grad, run.W1, run.lr, data.theta, LEARNED_OVERLAP
    )
    step = None if pred.steps is None else run.plateau_step + pred.steps
    return TrainingRun(
        run=run,
        eigs=res,
        overlaps=ov,
        decision=dec,
        predicted=pred,
        predicted_step=step,
        curves=curves,
    )
