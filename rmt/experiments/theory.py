"""Predictions of the free-probability engine at a point (docs/theory.md sections 3 and 4)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from rmt.freeprob import SpikeLaw, bulk_edges, outliers

#: laws of data-independent points, by configuration and ``(Q, M)``: the law does not depend on
#: ``delta`` or on the seed, and a sweep evaluates it at every one of them
_LAWS: OrderedDict = OrderedDict()
#: laws kept (a few configurations; a nested law of 230k nodes and m = 2 is about 20 MB)
LAW_CACHE_SIZE = 4


def point_law(config, point, model=None, net=None):
    """The Gaussian law of ``(zhat, D)`` at a data-independent ``point``, with the weight decay
    of ``config`` as its shift; ``None`` when the point has no such law (``law_inputs()``).

    Without an explicit ``model`` and ``net`` the law is built once per configuration and
    ``(Q, M)``, and the same (read-only) object is returned to later calls (``_LAWS``)."""
    inputs = point.law_inputs()
    if inputs is None:
        return None
    Q, M = (np.ascontiguousarray(a, dtype=np.float64) for a in inputs)
    key = None if model is not None or net is not None else _law_key(config, Q, M)
    if key in _LAWS:
        _LAWS.move_to_end(key)
        return _LAWS[key]
    model = config.model() if model is None else model
    net = config.net() if net is None else net
    law = SpikeLaw.from_network(model, net, Q, M, weight_decay=config.weight_decay)
    if key is not None:
        _LAWS[key] = law
        while len(_LAWS) > LAW_CACHE_SIZE:
            _LAWS.popitem(last=False)
    return law


def _law_key(config, Q, M):
    """What fixes the law: the target, the network, the weight decay, and ``(Q, M)`` exactly."""
    fields = ("target", "noise", "width", "activation", "loss", "huber_delta", "weight_decay")
    return (
        tuple(getattr(config, f) for f in fields),
        config.model().k,
        Q.shape,
        Q.tobytes(),
        M.shape,
        M.tobytes(),
    )


def theory_at(law, delta: float, n_out: int) -> dict:
    """Left bulk edge, right edge and the ``n_out`` lowest predicted outliers at ``delta``.

    ``bottom`` is the predicted smallest eigenvalue: the lowest outlier when there is one,
    otherwise the left edge.
    """
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
