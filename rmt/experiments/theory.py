"""Predictions of the free-probability engine at a point (docs/theory.md sections 3 and 4)."""

from __future__ import annotations

import numpy as np


def point_law(config, point, model=None, net=None):
    """The Gaussian law of ``(zhat, D)`` at a data-independent ``point``, with the weight decay
    of ``config`` as its shift; ``None`` when the point has no such law (``law_inputs()``)."""
    from ..freeprob import SpikeLaw

    inputs = point.law_inputs()
    if inputs is None:
        return None
    model = config.model() if model is None else model
    net = config.net() if net is None else net
    Q, M = inputs
    return SpikeLaw.from_network(model, net, Q, M, weight_decay=config.weight_decay)


def theory_at(law, delta: float, n_out: int) -> dict:
    """Left bulk edge, right edge and the ``n_out`` lowest predicted outliers at ``delta``.

    ``bottom`` is the predicted smallest eigenvalue: the lowest outlier when there is one,
    otherwise the left edge.
    """
    from ..freeprob import bulk_edges, outliers

    edges = bulk_edges(law, delta)
    outs = sorted(outliers(law, delta, side="left", edges=edges), key=lambda o: o.value)
    values = [o.value for o in outs[:n_out]]
    overlaps = [o.overlap_theta for o in outs[:n_out]]
    bottom = values[0] if values else edges.lo
    return {
        "edge_lo": edges.lo,
        "edge_hi": edges.hi,
        "outliers": values,
        "overlaps": overlaps,
        "bottom": bottom,
    }


def theory_curve(law, deltas) -> dict:
    """Edges, bottom outlier and its ``Theta*`` overlap on a grid of ``delta`` (nan if none)."""
    cols = {k: [] for k in ("delta", "edge_lo", "edge_hi", "outlier", "overlap_theta")}
    for x in deltas:
        try:
            th = theory_at(law, float(x), 1)
        except Exception:  # a failed solve leaves a gap in the curve, never a made-up value
            th = {"edge_lo": np.nan, "edge_hi": np.nan, "outliers": [], "overlaps": []}
        cols["delta"].append(float(x))
        cols["edge_lo"].append(th["edge_lo"])
        cols["edge_hi"].append(th["edge_hi"])
        cols["outlier"].append(th["outliers"][0] if th["outliers"] else np.nan)
        cols["overlap_theta"].append(th["overlaps"][0] if th["overlaps"] else np.nan)
    return {k: np.asarray(v) for k, v in cols.items()}
