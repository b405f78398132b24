"""One simulated point: sample the data, build the weights of the point, form the Hessian.

docs/theory.md sections 2 and 6.
"""

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
    """The data, the weights and the Hessian of one ``(delta, seed)`` (docs/theory.md section 2).

    Samples ``n = config.n_of(delta)`` points in ``config.d`` dimensions from the stream of
    ``(delta, seed)`` (:meth:`rmt.RunConfig.rng_for`), builds ``W`` at ``point`` and the
    Hessian there (with the weight decay).

    Parameters
    ----------
    config : rmt.RunConfig
        Model, network, ``d`` and weight decay.
    point : rmt.Point
        The point (:func:`prepare_point`).
    delta : float
        The sample ratio ``n / d``.
    seed : int
        The run seed.

    Returns
    -------
    Simulation

    Raises
    ------
    TypeError
        When ``point`` is not an :class:`rmt.Point`.

    Examples
    --------
    At the zero point the Hessian is ``(1/n) sum_i D_i (x) x_i x_i^T`` with the blocks at
    ``W = 0``; its dense form against numpy:

    >>> import numpy as np
    >>> import rmt
    >>> from rmt.experiments import prepare_point
    >>> cfg = rmt.RunConfig(d=40, point="zero", width=2, activation="tanh", loss="square")
    >>> sim = rmt.simulate_point(cfg, prepare_point(cfg), 3.0, 0)
    >>> sim.data.X.shape, bool(np.all(sim.W == 0))
    ((120, 40), True)
    >>> X, D = sim.data.X, sim.hessian.D
    >>> dense = np.einsum("nij,na,nb->iajb", D, X, X).reshape(80, 80) / 120
    >>> bool(np.allclose(sim.hessian.to_dense(), dense))
    True
    """
    if not isinstance(point, Point):
        raise TypeError(f"point must be an rmt.Point; got {type(point).__name__}")
    rng = config.rng_for(delta, seed)
    data = config.model().sample(config.n_of(delta), config.d, rng=rng)
    net = config.net()
    W, record = point.realize(net, data, rng)
    hessian = Hessian(net, data, W, weight_decay=config.weight_decay)
    return Simulation(data, W, hessian, rng, record)


def prepare_point(config, model=None, net=None) -> Point:
    """:func:`rmt.make_point` for ``config``, refusing a point that failed.

    Parameters
    ----------
    config : rmt.RunConfig
    model : rmt.MultiIndexModel, optional
        Default ``config.model()``.
    net : rmt.TwoLayerNet, optional
        Default ``config.net()``.

    Returns
    -------
    rmt.Point

    Raises
    ------
    RuntimeError
        With the point's failure (a population point whose solve failed, say).
    """
    point = make_point(config, model, net)
    if point.failure:
        raise RuntimeError(point.failure)
    return point
