"""Is the curvature ``D`` unbounded on a side?  (docs/theory.md section 4, "Unbounded curvature".)

If ``D`` is unbounded below (above), so is the bulk: no outlier separates on that side, the limit
transition does not exist there and ``delta_NN = inf``.  A discretised law is always bounded, so
the answer is read off the exact map ``D(zhat, eps)`` along rays to infinity.
"""

from __future__ import annotations

import numpy as np

RADII = (6.0, 12.0, 24.0, 48.0)


def _directions(dims):
    # nearly axial rays, tilted so that no coordinate is exactly 0 (sign targets)
    axes = np.concatenate([np.eye(dims), -np.eye(dims)]) + 0.0137
    # a fixed, reproducible set of oblique directions (not a random draw)
    t = np.arange(1, 97)[:, None] * (np.arange(1, dims + 1)[None, :] * 0.7548776662 + 0.5698402910)
    oblique = np.cos(2.0 * np.pi * (t % 1.0)) + 0.01
    dirs = np.concatenate([axes, oblique])
    return dirs / np.linalg.norm(dirs, axis=1, keepdims=True)


def probe_unbounded(func, dims):
    """Return ``((below, above), reason)`` for ``D = func(points)`` along rays.

    A side counts as unbounded when the extreme eigenvalue of ``D`` over the rays keeps growing:
    from radius 12 to 48 it moves outward by more than half of ``1 + |value at radius 12|`` and
    it moves outward monotonically over the radii 6, 12, 24, 48.
    """
    dirs = _directions(dims)
    lows, highs = [], []
    with np.errstate(all="ignore"):
        for r in RADII:
            eig = np.linalg.eigvalsh(np.nan_to_num(func(r * dirs), posinf=1e300, neginf=-1e300))
            lows.append(eig.min())
            highs.append(eig.max())
    lows, highs = np.array(lows), np.array(highs)
    above = bool(np.all(np.diff(highs) > 0) and highs[3] - highs[1] > 0.5 * (1 + abs(highs[1])))
    below = bool(np.all(np.diff(lows) < 0) and lows[1] - lows[3] > 0.5 * (1 + abs(lows[1])))
    reason = (
        f"extreme eigenvalues of D along rays at radii {RADII}: "
        f"min {np.array2string(lows, precision=3)}, max {np.array2string(highs, precision=3)}"
    )
    return (below, above), reason
