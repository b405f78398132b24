"""The plug-in law at a sample-dependent point, with the leave-one-out (cavity) correction.

docs/theory.md sections 3-4 and 6.  At the end of the first phase of full-batch gradient descent,
``W1`` is built from the sample, and the plug-in law of ``SpikeLaw.from_hessian`` (spike
coordinates ``zhat_i = B^T x_i`` along an orthonormal basis ``B`` of ``span(Theta*, W1)``)
can predict outliers the spectrum does not have.

**Why.**  Sections 3-4 are derived by leave-one-out: for sample ``i`` everything except ``x_i``
(the resolvent of the other samples, the spike basis) must be independent of ``x_i``, and
``zhat_i`` is the coordinate of ``x_i`` along that *cavity* basis, Gaussian and independent of
the label noise.  Gradient descent writes every sample into ``W``:
``W_T = W_0 - (lr/n) sum_t X^T G_t`` with ``G_t[i] = l'_i(t) a * sigma'(u_i(t))``.  With
``W^{(-i)}`` the trajectory run without sample ``i`` (same ``1/n``), ``Delta = W - W^{(-i)}``
obeys, to first order,

    Delta_{t+1} = (I - lr H_t) Delta_t - (lr/n) x_i g_i(t)^T,     Delta_0 = 0,

so ``Delta_T = -(lr/n) sum_s P_{T,s}[x_i g_i(s)^T]`` with ``P_{T,s} = prod_{u=s+1}^{T-1}
(I - lr H_u)``.  ``P`` depends on ``x_i`` only at order ``1/n``, so by concentration of
quadratic forms the pre-activation of sample ``i`` carries the self-term

    u_i - W^{(-i)T} x_i = x_i^T Delta_T = -lr sum_s R_s g_i(s),    R_s = (1/n) Tr_d P_{T,s},

an ``m x m`` response kernel per step (the discrete-time DMFT response: ``R_{T-1} = (d/n) I``,
earlier steps are damped or amplified by the curvature met on the way).  The naive plug-in
uses ``B^T x_i`` along the basis of ``W`` itself, so its coordinates along ``W`` contain the
self-term.  That double counts the coupling between ``zhat`` and ``D``: ``E[zhat zhat^T (x) F]``
is inflated most along the small singular direction of ``W`` (``w_1 - w_2`` for two neurons
that grew together), where the self-term is largest relative to the spread of ``W^T x``, and
that is where a spurious outlier lives (no ``Theta*`` overlap, neurons opposite).

**The fix.**  Keep the true ``D_i`` (they are what ``H`` is made of) and replace the coordinates
along ``W`` by the cavity ones: with ``W_perp = U R`` (``U`` orthonormal, orthogonal to
``Theta*``), ``zhat_i = (Theta*^T x_i, U^T x_i - R^{-T} self_i)``.  The cavity coordinates are then
standard Gaussian and uncorrelated with ``y``, as sections 3-4 assume.  At a
data-independent ``W`` the self-term is zero and the law is the naive plug-in.

**Exact and approximate.**  The identity ``W_T = W_0 - (lr/n) sum_t X^T G_t`` is exact.  The
self-term is first order in ``Delta`` (``||Delta|| = O(d^{-1/2})``), uses the full Hessian for
``H_{-i}``, drops the ``O(1/n)`` part of ``Delta`` along ``Theta*``, evaluates ``g_i`` on the full
trajectory, and estimates the traces with Hutchinson probes (relative error about
``(2 / (probes d))^{1/2}``).  The law is then the empirical law of a finite sample, so the
edge is known to the ``d^{-2/3}`` edge fluctuations and outliers to ``d^{-1/2}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rmt.freeprob.law import SpikeLaw
from rmt.freeprob.outliers import outliers
from rmt.freeprob.spectrum import bulk_edges
from rmt.problem.models import Dataset
from rmt.problem.network import TwoLayerNet
from rmt.validation import as_float_array, check_nonneg_float, check_positive_int


@dataclass(frozen=True)
class FirstPhaseTrajectory:
    """Full-batch gradient descent up to the first minimum of the gradient norm.

    ``iterates[t]`` is ``W_t`` (``T+1`` of them, ``iterates[-1]`` is the stopping point ``W``);
    ``grad_norm[t]`` is ``||grad L(W_t)||_F``; ``stopped`` is False when ``max_steps`` ran out
    before the gradient norm turned up.
    """

    iterates: np.ndarray
    grad_norm: np.ndarray
    lr: float
    stopped: bool

    @property
    def W(self) -> np.ndarray:
        return self.iterates[-1]

    @property
    def steps(self) -> int:
        return self.iterates.shape[0] - 1


def _check_net_data(net, data):
    if not isinstance(net, TwoLayerNet):
        raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
    if not isinstance(data, Dataset):
        raise TypeError(f"data must be an rmt.Dataset; got {type(data).__name__}")
    if data.theta is None:
        raise ValueError("data.theta is None: the plug-in law needs Theta*")


def sample_gradients(net, data, W) -> np.ndarray:
    """Per-sample gradient coefficients ``G[i] = l'(y_i, f_i) a * sigma'(u_i)``.

    The gradient of the mean loss is ``X^T G / n`` (docs/theory.md section 1.3).

    Parameters
    ----------
    net : rmt.TwoLayerNet
    data : rmt.Dataset
    W : numpy.ndarray (d, m)

    Returns
    -------
    numpy.ndarray (n, m)
    """
    sig, ds, _ = net.sigma(data.X @ W)
    _, dl, _ = net.loss_derivatives(data.y, sig @ net.a)
    return (dl[:, None] * ds) * net.a[None, :]


def first_phase_trajectory(
    net, data, W0=None, *, lr=0.5, init_scale=1e-2, max_steps=5000, rng=None
) -> FirstPhaseTrajectory:
    """Gradient descent stopped at the first local minimum of the gradient norm: the first
    plateau, before the escape (docs/theory.md sections 6 and 7.5).

    Parameters
    ----------
    net : rmt.TwoLayerNet
    data : rmt.Dataset
        With ``theta``.
    W0 : array_like (d, m), optional
        The start; default ``init_scale * N(0, 1/d)`` entries drawn from ``rng``.
    lr : float
        The step size, positive.
    init_scale : float
        The scale of the default start.
    max_steps : int
        The most updates (at least 2).
    rng : int or numpy.random.Generator, optional
        Seed of the default start.

    Returns
    -------
    FirstPhaseTrajectory
        ``stopped`` is False when ``max_steps`` ran out first.

    Raises
    ------
    TypeError, ValueError
        For bad input (a dataset without ``theta``, ``lr <= 0``, say).
    """
    _check_net_data(net, data)
    lr = check_nonneg_float(lr, "lr")
    if lr == 0:
        raise ValueError("lr must be > 0; got 0")
    max_steps = check_positive_int(max_steps, "max_steps", minimum=2)
    if W0 is None:
        scale = check_nonneg_float(init_scale, "init_scale")
        W0 = scale * np.random.default_rng(rng).standard_normal((data.d, net.width))
        W0 /= np.sqrt(data.d)
    W = net.check_weights(W0, data.d).copy()
    iterates, gnorm = [], []
    for _ in range(max_steps + 1):
        grad = data.X.T @ sample_gradients(net, data, W) / data.n
        iterates.append(W)
        gnorm.append(float(np.linalg.norm(grad)))
        if len(gnorm) >= 3 and gnorm[-3] > gnorm[-2] < gnorm[-1]:
            return FirstPhaseTrajectory(np.array(iterates[:-1]), np.array(gnorm[:-1]), lr, True)
        W = W - lr * grad
    return FirstPhaseTrajectory(np.array(iterates), np.array(gnorm), lr, False)


def _hvp(X, D, V):
    """``H V_p = X^T r / n`` with ``r_i = D_i V_p^T x_i`` for a block ``V`` (``d x p x m``)."""
    n, (d, p, m) = X.shape[0], V.shape
    XV = (X @ V.reshape(d, p * m)).reshape(n, p, m)
    return (X.T @ np.einsum("ijk,ipk->ipj", D, XV).reshape(n, p * m)).reshape(d, p, m) / n


def response_kernel(net, data, trajectory, *, probes=8, rng=None) -> np.ndarray:
    """``R_s = (1/n) Tr_d prod_{u=s+1}^{T-1} (I - lr H(W_u))`` by Hutchinson (module doc).

    Each probe ``xi`` (``d x m``) is propagated backwards, ``eta_s = (I - lr H_{s+1}) eta_{s+1}``
    from ``eta_{T-1} = xi``, and ``R_s += xi^T eta_s / (n probes)``.

    Parameters
    ----------
    net : rmt.TwoLayerNet
    data : rmt.Dataset
        With ``theta``.
    trajectory : FirstPhaseTrajectory
    probes : int
        Hutchinson probes.
    rng : int or numpy.random.Generator, optional
        Seed of the probes.

    Returns
    -------
    numpy.ndarray (T, m, m)

    Raises
    ------
    TypeError, ValueError
        For bad input.
    """
    _check_net_data(net, data)
    if not isinstance(trajectory, FirstPhaseTrajectory):
        raise TypeError(f"trajectory must be a FirstPhaseTrajectory; got {type(trajectory)}")
    probes = check_positive_int(probes, "probes")
    rng = np.random.default_rng(rng)
    T, m = trajectory.steps, net.width
    xi = rng.standard_normal((data.d, probes, m))
    eta = xi.copy()
    R = np.zeros((T, m, m))
    for s in range(T - 1, -1, -1):
        R[s] = np.einsum("dpj,dpk->jk", xi, eta)
        if s > 0:
            D = net.curvature(data.X @ trajectory.iterates[s], data.y)
            eta = eta - trajectory.lr * _hvp(data.X, D, eta)
    return R / (data.n * probes)


def cavity_self_term(net, data, trajectory, *, probes=8, rng=None) -> np.ndarray:
    """Self-term ``u_i - W^{(-i)T} x_i = -lr sum_s R_s g_i(s)`` of every sample
    (docs/theory.md section 7.5; module doc).

    ``W^{(-i)}`` is the gradient-descent trajectory without sample ``i``; ``R_s`` is
    :func:`response_kernel` and ``g_i(s)`` the per-sample gradient (:func:`sample_gradients`).

    Parameters
    ----------
    net : rmt.TwoLayerNet
    data : rmt.Dataset
        With ``theta``.
    trajectory : FirstPhaseTrajectory
        The first phase (:func:`first_phase_trajectory`).
    probes : int
        Hutchinson probes of the traces.
    rng : int or numpy.random.Generator, optional
        Seed of the probes.

    Returns
    -------
    numpy.ndarray (n, m)

    Raises
    ------
    TypeError, ValueError
        For bad input.

    Examples
    --------
    Against the exact leave-one-out: gradient descent rerun without sample ``i`` (same
    ``1/n``), from the same start, for the same steps, gives ``x_i^T (W - W^{(-i)})``:

    >>> import numpy as np
    >>> import rmt
    >>> from rmt.freeprob.plugin import first_phase_trajectory, sample_gradients
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(600, 150, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    >>> traj = first_phase_trajectory(net, data, lr=0.5, rng=1, max_steps=300)
    >>> self_term = rmt.cavity_self_term(net, data, traj, probes=8, rng=2)
    >>> def leave_out(i):
    ...     keep = np.arange(data.n) != i
    ...     rest = rmt.Dataset(data.X[keep], data.y[keep], data.theta)
    ...     W = traj.iterates[0]
    ...     for _ in range(traj.steps):
    ...         W = W - 0.5 * rest.X.T @ sample_gradients(net, rest, W) / data.n
    ...     return data.X[i] @ (traj.W - W)
    >>> exact = np.array([leave_out(i) for i in range(5)])
    >>> traj.stopped, self_term.shape
    (True, (600, 2))
    >>> bool(np.corrcoef(exact.ravel(), self_term[:5].ravel())[0, 1] > 0.95)
    True
    """
    R = response_kernel(net, data, trajectory, probes=probes, rng=rng)
    out = np.zeros((data.n, net.width))
    for s in range(trajectory.steps):
        out -= trajectory.lr * sample_gradients(net, data, trajectory.iterates[s]) @ R[s].T
    return out


def plugin_law(net, data, W, *, self_term=None, weight_decay=0.0) -> SpikeLaw:
    """Plug-in law of the Hessian at ``W``, with cavity coordinates along ``W`` (module doc).

    ``self_term`` (``n x m``, from :func:`cavity_self_term`) is subtracted from the
    pre-activations before they are written in the orthonormal basis ``U`` of ``W`` off
    ``Theta*``; ``None`` (a data-independent ``W``) gives the naive plug-in law, whose spike
    coordinates are ``B^T x_i`` with ``B = [Theta*, U]``.  ``D_i`` is the sample's own block
    (docs/theory.md sections 6 and 7.5).

    Parameters
    ----------
    net : rmt.TwoLayerNet
    data : rmt.Dataset
        With ``theta``.
    W : array_like (d, m)
        The weights.
    self_term : array_like (n, m), optional
        The cavity self-term (:func:`cavity_self_term`).
    weight_decay : float
        The shift of the law.

    Returns
    -------
    rmt.SpikeLaw
        The empirical law of the ``n`` samples.

    Raises
    ------
    TypeError, ValueError
        For bad input (a dataset without ``theta``, a ``self_term`` of another shape).

    Examples
    --------
    At a data-independent ``W`` the nodes are the samples: the spike coordinates are
    ``(X Theta*, X U)`` and the curvature blocks those of the Hessian; the predicted right
    edge is near the largest eigenvalue of the dense Hessian:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(1000, 200, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="softplus", loss="huber")
    >>> W = np.random.default_rng(1).standard_normal((200, 2)) / np.sqrt(200)
    >>> law = rmt.plugin_law(net, data, W)
    >>> H = rmt.Hessian(net, data, W)
    >>> law.zhat.shape, bool(np.allclose(law.zhat[:, 0], data.X @ data.theta[:, 0]))
    ((1000, 3), True)
    >>> bool(np.allclose(law.D, H.D))
    True
    >>> top = np.linalg.eigvalsh(H.to_dense())[-1]
    >>> bool(abs(rmt.bulk_edges(law, 5.0).hi - top) < 0.05 * top)
    True
    """
    _check_net_data(net, data)
    W = net.check_weights(W, data.d)
    theta = data.theta
    Wp = W - theta @ (theta.T @ W)
    U, s, Vt = np.linalg.svd(Wp, full_matrices=False)
    keep = s > 1e-10 * max(1.0, s.max(initial=0.0))
    U, R = U[:, keep], s[keep, None] * Vt[keep]  # W_perp = U R
    zU = data.X @ U
    if self_term is not None:
        self_term = as_float_array(self_term, "self_term", ndim=2)
        if self_term.shape != (data.n, net.width):
            raise ValueError(
                f"self_term must be (n, m) = {(data.n, net.width)}; got {self_term.shape}"
            )
        # u_perp = R^T zU, so the cavity zU solves R^T zU_cav = R^T zU - self (least squares)
        zU = zU - np.linalg.lstsq(R.T, self_term.T, rcond=None)[0].T
    return SpikeLaw(
        np.concatenate([data.X @ theta, zU], axis=1),
        net.curvature(data.X @ W, data.y),
        None,
        theta.shape[1],
        shift=check_nonneg_float(weight_decay, "weight_decay"),
        kind="empirical",
        unbounded_reason="empirical law: boundedness not assessed",
    )


@dataclass(frozen=True)
class PluginPrediction:
    """Bulk edges, outliers on ``side`` (ordered from the far end) and their ``Theta*`` overlaps.

    ``bottom`` is the extreme predicted eigenvalue on ``side``: the farthest outlier, or the edge.
    """

    edge_lo: float
    edge_hi: float
    outliers: np.ndarray
    overlaps_theta: np.ndarray
    bottom: float


def plugin_prediction(law, delta, *, side="left", edges=None) -> PluginPrediction:
    """Edges and outliers of ``law`` at ``delta`` (docs/theory.md sections 3-4), as one record.

    Parameters
    ----------
    law : rmt.SpikeLaw
    delta : float
        The sample ratio ``n / d``.
    side : {"left", "right"}
        The side of the outliers.
    edges : BulkEdges, optional
        :func:`rmt.bulk_edges` of the same law and ``delta``, computed once for several
        readers (default: computed here).

    Returns
    -------
    PluginPrediction

    Raises
    ------
    TypeError
        When ``law`` is not an :class:`rmt.SpikeLaw`.
    rmt.ConvergenceError, ValueError
        When the edges or outliers fail.
    """
    if not isinstance(law, SpikeLaw):
        raise TypeError(f"law must be an rmt.SpikeLaw; got {type(law).__name__}")
    edges = bulk_edges(law, delta) if edges is None else edges
    found = outliers(law, delta, side, edges=edges)
    values = np.array([o.value for o in found])
    edge = edges.lo if side == "left" else edges.hi
    return PluginPrediction(
        float(edges.lo),
        float(edges.hi),
        values,
        np.array([o.overlap_theta for o in found]),
        float(values[0]) if values.size else float(edge),
    )
