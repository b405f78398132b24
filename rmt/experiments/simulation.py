"""One simulated point: sample the data, build the weights of the point, form the Hessian."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.kernels.threads import adaptive_threads
from rmt.operators.hessian import Hessian
from rmt.problem.models import Dataset
from rmt.thresholds.points import Point, make_point


@dataclass(frozen=True)
class Simulation:
    """The sample ``data``, the weights ``W``, the Hessian at ``W`` and the ``rng`` they used.

    ``record`` is what building ``W`` recorded (the :class:`rmt.GDRun` of a trained point,
    else ``None``).  ``rng`` has been advanced by the sampling and the point; later draws at
    this ``(delta, seed)`` (e.g. an eigensolver's start) continue from it.
    """

    data: Dataset
    W: np.ndarray
    hessian: Hessian
    rng: np.random.Generator
    record: object = None


@adaptive_threads
def simulate_point(config, point: Point, delta: float, seed: int) -> Simulation:
    """Sample ``n = config.n_of(delta)`` points in ``config.d`` dimensions from the stream of
    ``(delta, seed)``, build ``W`` at ``point`` and the Hessian there (with the weight decay)."""
    if not isinstance(point, Point):
        raise TypeError(f"point must be an rmt.Point; got {type(point).__name__}")
    rng = config.rng_for(delta, seed)
    data = config.model().sample(config.n_of(delta), config.d, rng=rng)
    net = config.net()
    W, record = point.realize(net, data, rng)
    hessian = Hessian(net, data, W, weight_decay=config.weight_decay)
    return Simulation(data, W, hessian, rng, record)


def prepare_point(config, model=None, net=None) -> Point:
    """:func:`rmt.make_point` for ``config``, refusing a point that failed (RuntimeError)."""
    point = make_point(config, model, net)
    if point.failure:
        raise RuntimeError(point.failure)
    return point
