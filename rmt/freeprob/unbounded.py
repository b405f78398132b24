"""Is the curvature ``D`` unbounded on a side?  (docs/theory.md section 4, "Unbounded curvature".)

If ``D`` is unbounded below (above), so is the bulk: no outlier separates on that side, the limit
transition does not exist there and ``delta_NN = inf``.  A discretised law is always bounded, so
the answer is read off the exact map ``D(zhat, eps)`` far out: along fixed rays to infinity, and
on spheres of growing radius sampled in many directions.  The samples catch what rays miss: a
band along which ``D`` grows, thin in angle (square activation with a Huber loss at ``M != 0``:
``l'' = 1`` only where ``u^2 ~ z^2``, a band of angular width ``~ 1/r^2``).
"""

from __future__ import annotations

import numpy as np

from rmt.kernels.curvature import block_eigenvalues, gershgorin_bounds

RADII = (6.0, 12.0, 24.0, 48.0)
#: directions sampled on each sphere (a fixed, seeded draw): a band of angular fraction
#: ``~ 1/r^2`` gets ``~ 10`` of them at ``r = 48``
SHELL_DIRECTIONS = 20_000
SHELL_SEED = 20261201


def _directions(dims):
    # nearly axial rays, tilted so that no coordinate is exactly 0 (sign targets)
    axes = np.concatenate([np.eye(dims), -np.eye(dims)]) + 0.0137
    # a fixed, reproducible set of oblique directions (not a random draw)
    t = np.arange(1, 97)[:, None] * (np.arange(1, dims + 1)[None, :] * 0.7548776662 + 0.5698402910)
    oblique = np.cos(2.0 * np.pi * (t % 1.0)) + 0.01
    # many directions drawn once from a fixed seed: uniform on the sphere
    shell = np.random.default_rng(SHELL_SEED).standard_normal((SHELL_DIRECTIONS, dims))
    dirs = np.concatenate([axes, oblique, shell])
    return dirs / np.linalg.norm(dirs, axis=1, keepdims=True)


def _extremes(func, points):
    """Smallest and largest eigenvalue of ``D`` over ``points``: those of ``eigvalsh`` over all
    the blocks, computed on the few blocks that can hold them (``_extreme_eigenvalues``)."""
    with np.errstate(all="ignore"):
        D = np.nan_to_num(func(points), nan=0.0, posinf=1e300, neginf=-1e300)
    return _extreme_eigenvalues(D)


#: a block is kept for ``eigvalsh`` when its Gershgorin bound comes within this relative
#: distance of the best diagonal entry (far above the rounding of ``eigvalsh``, ``~ m eps``)
GERSHGORIN_SLACK = 1e-8


def _extreme_eigenvalues(D):
    """``(min, max)`` of the eigenvalues of the symmetric blocks ``D`` (``N x m x m``), equal to
    ``eigvalsh(D).min()`` and ``.max()`` to ``m eps`` times the largest entry of the block.

    For ``m = 1`` they are the entries.  Otherwise every eigenvalue of ``D_i`` lies in its
    Gershgorin discs, and some block has an eigenvalue at least (at most) the largest (smallest)
    diagonal entry ``t``; a block whose discs stay short of ``t`` by more than the rounding of
    an eigensolver cannot hold the extreme, so the eigenvalues (``block_eigenvalues``, to ``m eps
    max|D_i|`` as LAPACK's) are computed on the others only."""
    if D.shape[1] == 1:
        return D[:, 0, 0].min(), D[:, 0, 0].max()
    D = np.ascontiguousarray(D, dtype=np.float64)
    lower, upper, size = (np.empty(D.shape[0]) for _ in range(3))
    with np.errstate(all="ignore"):
        dmin, dmax = gershgorin_bounds(D, lower, upper, size)
        slack = GERSHGORIN_SLACK * size
        lo_keep = ~(lower - slack > dmin + GERSHGORIN_SLACK * (1.0 + abs(dmin)))  # nan kept
        hi_keep = ~(upper + slack < dmax - GERSHGORIN_SLACK * (1.0 + abs(dmax)))
        lo_blocks, hi_blocks = D[lo_keep], D[hi_keep]
    lo_eig, hi_eig = np.empty(lo_blocks.shape[:2]), np.empty(hi_blocks.shape[:2])
    block_eigenvalues(lo_blocks, lo_eig)
    block_eigenvalues(hi_blocks, hi_eig)
    return lo_eig.min(), hi_eig.max()


def probe_far(func, dims):
    """``(lows, highs, n_directions)``: the extreme eigenvalues of ``D = func(points)`` over the
    rays and the ``SHELL_DIRECTIONS`` seeded directions on each sphere of radius ``RADII``."""
    dirs = _directions(dims)
    lows, highs = np.array([_extremes(func, r * dirs) for r in RADII]).T
    return lows, highs, dirs.shape[0]


def classify_far(lows, highs, n_directions):
    """``((below, above), reason)`` from the extremes of :func:`probe_far`.

    A side counts as unbounded when the extreme eigenvalue of ``D`` over a sphere keeps
    growing: from radius 12 to 48 it moves outward by more than half of
    ``1 + |value at radius 12|``, and it moves outward monotonically over the radii 6, 12, 24, 48.
    """
    above = bool(np.all(np.diff(highs) > 0) and highs[3] - highs[1] > 0.5 * (1 + abs(highs[1])))
    below = bool(np.all(np.diff(lows) < 0) and lows[1] - lows[3] > 0.5 * (1 + abs(lows[1])))
    reason = (
        f"extreme eigenvalues of D on spheres of radii {RADII} ({n_directions} directions): "
        f"min {np.array2string(lows, precision=3)}, max {np.array2string(highs, precision=3)}"
    )
    return (below, above), reason


def probe_unbounded(func, dims):
    """Return ``((below, above), reason)`` for ``D = func(points)`` far from the origin.

    ``D`` is evaluated along fixed rays and at ``SHELL_DIRECTIONS`` seeded directions on the
    spheres of radii ``RADII`` (:func:`probe_far`), then classified by :func:`classify_far`.
    """
    unbounded, reason, _ = probe_law(func, dims)
    return unbounded, reason


def probe_law(func, dims):
    """``((below, above), reason, far_range)``: :func:`probe_unbounded` and the extreme
    eigenvalues ``(min, max)`` of ``D`` met far out (``SpikeLaw.far_range``)."""
    lows, highs, n_directions = probe_far(func, dims)
    unbounded, reason = classify_far(lows, highs, n_directions)
    return unbounded, reason, (float(lows.min()), float(highs.max()))
