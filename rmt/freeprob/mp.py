"""Newton solver of the operator-valued Marchenko-Pastur equation (docs/theory.md section 3, (MP)).

    G(zeta) = ( -zeta I_m + E[F] )^{-1},    F = D (I_m + G D / delta)^{-1}.

Unknowns are the ``p = m(m+1)/2`` upper-triangular entries of the symmetric ``G`` (complex
symmetric for complex ``zeta``).  The residual is ``R(G) = -zeta I + E[F] - G^{-1}`` and, using
``dF = -(1/delta) F dG F``, its Jacobian is ``dR = -(1/delta) E[F dG F] + G^{-1} dG G^{-1}``.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from rmt.kernels._generated.freeprob_small import (
    MOMENTS,
    MOMENTS_COMPLEX,
    PIVOTS,
    SPIKE_BLOCK,
    SPIKE_SUMS,
)
from rmt.kernels.freeprob import min_pd_pivot, mp_moments, mp_residual, spike_moments
from rmt.kernels.freeprob_halves import (
    fill_spike_workspace,
    min_pivot_halves,
    moments_halves,
    spike_sums_halves,
)
from rmt.validation import check_positive_float

NEWTON_TOL = 1e-13
NEWTON_MAXIT = 40


class ConvergenceError(RuntimeError):
    """A solver did not converge; ``partial`` holds what it had (never to be used as an answer)."""

    def __init__(self, message, partial=None):
        super().__init__(message)
        self.partial = partial


class EdgeNotDetermined(ConvergenceError):
    """The real branch reached the pole of an extreme node that does not attain the extreme of
    ``D``: the edge on that side is not determined by the discretised law."""


@dataclass
class NewtonState:
    """A converged point of (MP): ``G``, its Jacobian ``J`` (in symmetric coordinates)."""

    zeta: complex
    G: np.ndarray
    J: np.ndarray
    iterations: int
    residual: float


class MPSystem:
    """(MP) for a fixed law and ``delta``: residuals, Jacobians, Newton, tangents."""

    def __init__(self, law, delta):
        delta = check_positive_float(delta, "delta")
        self.law, self.delta = law, delta
        self.m = m = law.m
        self.ia, self.ib = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(m))
        self.e = (self.ia == self.ib).astype(np.float64)  # vech(I)
        #: unrolled kernels for m <= 4 read vech(D_i) node-last (``Dv[u, i]``)
        self.unrolled = m in MOMENTS
        self._nodes = _node_arrays(law, self.unrolled)
        self.D, self.w, self.zhat, self.Dv = self._nodes.arrays
        self._spike_layout = None

    # -- symmetric coordinates ---------------------------------------------------------
    def vech(self, A):
        return A[self.ia, self.ib]

    def unvech(self, g):
        G = np.zeros((self.m, self.m), dtype=g.dtype)
        G[self.ia, self.ib] = g
        G[self.ib, self.ia] = g
        return G

    def sandwich(self, A):
        """Matrix of ``X -> A X A`` on symmetric ``X`` (symmetric coordinates), ``A`` symmetric."""
        ia, ib = self.ia, self.ib
        S = A[ia[:, None], ia[None, :]] * A[ib[None, :], ib[:, None]]
        off = (ia != ib)[None, :]
        S = S + off * A[ia[:, None], ib[None, :]] * A[ia[None, :], ib[:, None]]
        return S

    # -- residual and Jacobian -----------------------------------------------------------
    def moments(self, G, with_jac=True):
        p = self.ia.size
        EF = np.zeros((self.m, self.m), dtype=G.dtype)
        JF = np.zeros((p, p), dtype=G.dtype)
        if self.unrolled:
            halves = self._nodes.halves
            if halves is not None and not np.iscomplexobj(G):
                bad = moments_halves(self.m, *halves, G, 1.0 / self.delta, with_jac, EF, JF)
                return EF, JF, bad
            # complex G (the density, Stieltjes off the axis): the split-arithmetic kernel
            table = MOMENTS_COMPLEX if np.iscomplexobj(G) else MOMENTS
            bad = table[self.m](self.Dv, self.w, G, 1.0 / self.delta, with_jac, EF, JF)
        else:
            bad = mp_moments(
                self.D, self.w, G, 1.0 / self.delta, self.ia, self.ib, with_jac, EF, JF
            )
        return EF, JF, bad

    def residual_jacobian(self, G, zeta):
        """``(vech R, J, scale)``; ``None`` for ``R`` when a node system is singular."""
        R, J, scale, _ = self.residual_parts(G, zeta)
        return R, J, scale

    def residual_parts(self, G, zeta):
        """``(vech R, J, scale, max |G^{-1}|)``; ``None`` for ``R`` when ``G`` or a node system
        is singular.  ``J`` is ``-E[F dG F] / delta + G^{-1} dG G^{-1}`` (see ``sandwich``)."""
        EF, JF, bad = self.moments(G)
        if bad:
            return None, None, 1.0, 0.0
        p = self.ia.size
        R, J = np.empty(p, dtype=G.dtype), np.empty((p, p), dtype=G.dtype)
        zeta = complex(zeta) if np.iscomplexobj(G) else float(zeta)
        ok, scale, ginv_max = mp_residual(EF, JF, G, zeta, 1.0 / self.delta, self.ia, self.ib, R, J)
        if not ok:
            return None, None, 1.0, 0.0
        return R, J, scale, ginv_max

    def newton(self, zeta, G0, maxit=NEWTON_MAXIT, tol=NEWTON_TOL, monotone=False):
        """Newton on the entries of ``G``; returns a ``NewtonState`` or ``None`` on failure.

        ``monotone``: fail as soon as an iteration does not reduce the residual.  Started from a
        tangent predictor on the branch, Newton is in its quadratic regime and the residual falls
        at every iteration; when it does not, the iterate is heading off the branch (past a fold
        or a pole), and the continuation had better shorten its step now than after ``maxit``
        iterations.
        """
        g = self.vech(np.asarray(G0, dtype=complex if np.iscomplexobj(zeta) else float))
        last = np.inf
        for it in range(maxit + 1):
            G = self.unvech(g)
            R, J, scale = self.residual_jacobian(G, zeta)
            if R is None:
                return None
            res = float(np.max(np.abs(R))) / scale
            if res <= tol:
                return NewtonState(zeta, G, J, it, res)
            if it == maxit or (monotone and res >= last):
                return None
            last = res
            try:
                step = np.linalg.solve(J, -R)
            except np.linalg.LinAlgError:
                return None
            g = g + step
            if not np.all(np.isfinite(g)):
                return None
        return None

    def tangent(self, state):
        """``dG/dzeta = J^{-1} vech(I)`` at a converged point (docs/theory.md section 4, ``G'``)."""
        return self.unvech(np.linalg.solve(state.J, self.e.astype(state.J.dtype)))

    # -- real branch checks --------------------------------------------------------------
    def pole_margin(self, G, side):
        """Smallest Cholesky pivot of ``I + G D_i / delta`` over nodes (``-1``: past a pole).

        For ``m = 1`` the pivot of node ``i`` is ``1 + G D_i / delta``, smallest at the
        extreme node of ``law.node_range`` on the side of ``-sign(G)``: no pass over the nodes."""
        if self.m == 1:
            g = float(G[0, 0])
            if not -side * g > 0.0:
                return -1.0
            value = 1.0 + g * self.law.node_range[0 if g > 0.0 else 1] / self.delta
            return value if value > 0.0 else -1.0
        try:
            L = np.ascontiguousarray(np.linalg.cholesky(-side * G))
        except np.linalg.LinAlgError:
            return -1.0
        if not self.unrolled:
            return min_pd_pivot(self.D, L, -side / self.delta)
        halves = self._nodes.halves
        if halves is not None:
            return min_pivot_halves(self.m, halves[0], halves[1], L, -side / self.delta)
        pivots = np.empty(self.D.shape[0])
        if PIVOTS[self.m](self.Dv, L, -side / self.delta, pivots):
            return -1.0
        return float(pivots.min())

    def admissible(self, G, side):
        """On the real branch ``side`` (-1 left, +1 right): ``-side G`` is positive definite and no
        ``I + G D_i / delta`` has crossed a pole."""
        return self.pole_margin(G, side) > 0.0

    def spike_matrices(self, G, Gp):
        """``E[kron(zhat zhat^T, F)]`` and ``E[kron(zhat zhat^T, F G' F)]`` (docs/theory.md section 4)."""
        if self.unrolled:
            return self._spike_matrices_unrolled(G, Gp)
        Km = self.law.K * self.m
        ES, ESp = np.zeros((Km, Km)), np.zeros((Km, Km))
        bad = spike_moments(
            self.D,
            self.w,
            self.zhat,
            np.ascontiguousarray(G, dtype=float),
            np.ascontiguousarray(Gp, dtype=float),
            1.0 / self.delta,
            ES,
            ESp,
        )
        if bad:
            raise ConvergenceError("a node system I + G D_i/delta is singular at this point")
        return 0.5 * (ES + ES.T), 0.5 * (ESp + ESp.T)

    def _spike_matrices_unrolled(self, G, Gp):
        """``spike_matrices`` from the sums of ``vech F``, ``vech F G' F`` weighted by
        ``w zhat_q zhat_r`` (``q <= r``): for ``K <= 3`` summed in the node loop of one fused
        kernel, beyond that (10 or 15 pairs) from the per-node terms of ``SPIKE_NODES`` in
        their block workspace (``_spike_workspace``), each block summed while it is in cache,
        the two halves of the blocks on two threads (``freeprob_halves.spike_sums_halves``;
        numpy's batched product over the blocks took as long as the node kernel)."""
        if self._spike_layout is None:
            K, m = self.law.K, self.m
            qa, qb = np.triu_indices(K)
            tri_k, tri_m = np.zeros((K, K), int), np.zeros((m, m), int)
            tri_k[qa, qb] = tri_k[qb, qa] = np.arange(qa.size)
            tri_m[self.ia, self.ib] = tri_m[self.ib, self.ia] = np.arange(self.ia.size)
            rows = np.repeat(tri_k, m, axis=0).repeat(m, axis=1)  # (q, r) of entry (qm+a, rm+b)
            cols = np.tile(tri_m, (K, K))  # (a, b)
            fused = SPIKE_SUMS.get((m, qa.size))
            if fused is not None:
                sums = (fused, self._nodes.weight_rows())
            else:
                sums = (None, _cached_workspace(self.law, self._nodes))
            self._spike_layout = (sums, rows, cols)
        (fused, data), rows, cols = self._spike_layout
        p = self.Dv.shape[0]
        G = np.ascontiguousarray(G, dtype=float)
        Gp = np.ascontiguousarray(Gp, dtype=float)
        if fused is not None:
            Y = np.empty((data.shape[0], 2 * p))  # (pairs q <= r) x (vech F, vech F G' F)
            bad = fused(self.Dv, data, G, Gp, 1.0 / self.delta, Y)
        else:
            W, blocks, ZZ = data
            Y = np.empty((ZZ.shape[1], 2 * p))
            bad = spike_sums_halves(self.m, W, blocks, ZZ, G, Gp, 1.0 / self.delta, Y)
        if bad:
            raise ConvergenceError("a node system I + G D_i/delta is singular at this point")
        return Y[rows, cols], Y[rows, p + cols]

    def far(self, side=0):
        """A distance beyond which ``G ~ -I/zeta`` starts Newton safely on ``side`` (0: both)."""
        lo, hi = self.law.node_range
        reach = {-1: max(-lo, 0.0), 1: max(hi, 0.0), 0: max(-lo, hi)}[side]
        return 4.0 * (reach + self.law.scale) * (1.0 + 1.0 / np.sqrt(self.delta)) ** 2 + 1.0


#: laws with at least this many nodes run the real moments and the pivots on two threads over
#: the two halves of their nodes (``rmt.kernels.freeprob_halves``), for these widths; for
#: m = 2 the woken threads spin beside the small LAPACK calls of each step and cost more than
#: they save (benchmarks/RESULTS.md)
HALVES_MIN_NODES = 16384
HALVES_WIDTHS = (3, 4)

#: the node arrays of a law as the kernels read them, by law: every ``MPSystem`` of a sweep point
#: (edges, outliers, at each delta) reads the same nodes, so the node-last copy ``Dv`` is made
#: once per law
_NODE_ARRAYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _LawNodes:
    """A law's node arrays as the kernels read them: ``arrays = (D, w, zhat, Dv)``, contiguous,
    ``Dv = vech(D_i)`` node-last (``None`` unless unrolled), and the spike weight rows, made on
    first use; ``sources`` are the law's arrays they were made from."""

    def __init__(self, sources, unrolled):
        self.sources = sources
        D, w, zhat = (np.ascontiguousarray(a) for a in sources)
        Dv = None
        if unrolled:
            ia, ib = np.triu_indices(D.shape[1])
            Dv = np.ascontiguousarray(D[:, ia, ib].T)
        self.arrays = (D, w, zhat, Dv)
        #: ``(D0, D1, w0, w1)``: the node-last ``vech D`` and the weights in two contiguous
        #: halves, for ``moments_halves`` and ``min_pivot_halves`` (``m`` in ``HALVES_WIDTHS``,
        #: at least ``HALVES_MIN_NODES`` nodes)
        self.halves = None
        N = D.shape[0]
        if unrolled and D.shape[1] in HALVES_WIDTHS and N >= HALVES_MIN_NODES:
            h = N // 2
            self.halves = (
                np.ascontiguousarray(Dv[:, :h]),
                np.ascontiguousarray(Dv[:, h:]),
                w[:h].copy(),
                w[h:].copy(),
            )
        self._weight_rows = None

    def weight_rows(self):
        """``w zhat_q zhat_r`` for each pair ``q <= r`` in ``np.triu_indices`` order (pairs x
        nodes, C-contiguous): the product can cost more than a spike sum, so it is made once
        per law.  Read-only, shared by threads."""
        if self._weight_rows is None:
            _, w, zhat, _ = self.arrays
            qa, qb = np.triu_indices(zhat.shape[1])
            self._weight_rows = np.ascontiguousarray((w[:, None] * zhat[:, qa] * zhat[:, qb]).T)
        return self._weight_rows


def _node_arrays(law, unrolled):
    """The :class:`_LawNodes` of ``law``, built once per law and kept while ``law.D``,
    ``law.weights`` and ``law.zhat`` are the same objects."""
    sources = (law.D, law.weights, law.zhat)
    kept = _NODE_ARRAYS.get(law)
    if kept is None or not all(a is b for a, b in zip(kept.sources, sources)):
        kept = _NODE_ARRAYS[law] = _LawNodes(sources, unrolled)
    return kept


#: the block workspaces of ``SPIKE_NODES`` by law and thread: a law's nodes do not change, and
#: building the workspace anew for each solve (fresh pages, the copies) would cost more than
#: the spike sums of a whole sweep point save
_SPIKE_WORKSPACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cached_workspace(law, nodes):
    """``_spike_workspace`` of ``law``'s nodes (a :class:`_LawNodes`), built once per law and
    thread (the kernel writes its outputs into it: threads solving the same law each get their
    own)."""
    per_law = _SPIKE_WORKSPACES.setdefault(law, {})
    key = threading.get_ident()
    if key not in per_law:
        _, w, zhat, Dv = nodes.arrays
        per_law[key] = _spike_workspace(Dv, w, zhat)
    return per_law[key]


def _spike_workspace(Dv, w, zhat):
    """``(W, blocks, ZZ)`` for ``SPIKE_NODES``: the flat workspace ``W`` and its view
    ``blocks`` (``n_blocks x 3p x SPIKE_BLOCK``) with ``vech D`` in the first ``p`` rows of each
    block, and the weight rows ``w zhat_q zhat_r`` (``q <= r``) as ``ZZ`` (``n_blocks x pairs x
    SPIKE_BLOCK``), filled by one kernel (``fill_spike_workspace``, in place of numpy's padded
    copies and products).  The last
    block is padded with ``D = 0`` nodes of weight 0 (their ``F`` is 0, their system ``I``
    regular)."""
    p, N = Dv.shape
    n_blocks = -(-N // SPIKE_BLOCK)
    qa, qb = (np.asarray(v, dtype=np.int64) for v in np.triu_indices(zhat.shape[1]))
    W = np.empty(n_blocks * 3 * p * SPIKE_BLOCK)
    ZZ = np.empty((n_blocks, qa.size, SPIKE_BLOCK))
    fill_spike_workspace(Dv, w, np.ascontiguousarray(zhat), qa, qb, W, ZZ)
    return W, W.reshape(n_blocks, 3 * p, SPIKE_BLOCK), ZZ
