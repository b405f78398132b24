"""The first-layer Hessian over an ``X`` kept out of memory, product by row blocks.

``StreamingHessian(net, data, W)`` is ``rmt.Hessian`` (docs/theory.md section 2) for an ``X`` in
chunked storage, where ``data`` is an ``rmt.Dataset`` or a :class:`RowData` (``X`` out of memory,
``y`` in memory):

    H V = (1/n) sum_blocks X_b^T R_b + weight_decay V,    row i of R_b: r_i = (x_i^T V) D_i.

Each block ``X_b`` (``block_rows`` rows) is read, passed through the same Numba kernel as the
in-memory product (``rmt.kernels.hessian.fused_product``), and dropped.  Only ``D`` (``n x m x m``),
``y`` and the accumulator (``b m x d``) stay in memory, so the working set is one block plus
those.  ``X`` (of a ``RowData``) may be

- a ``numpy.ndarray`` or ``numpy.memmap`` (C order; float64 and float32 blocks are used without
  a copy: float32 storage of ``X`` is read as float32 and summed in float64 by the kernels),
- a path to an ``.npy`` file, opened with ``numpy.load(path, mmap_mode="r")`` (a shared
  read-only mapping: a copy-on-write one, ``"c"``, is charged in full against the memory
  commit limit and fails with ENOMEM for a file larger than RAM; the read-only blocks make
  Numba compile, once, and cache read-only variants of the kernels),
- any 2-d array with row slicing, ``shape`` and ``dtype``: a zarr array (blocks are aligned to
  its chunks), an h5py dataset.  Blocks that are not C-ordered float64 or float32 are copied
  (to float64; a float32 source stays float32).

For a memmap the pages of ``X`` live in the operating system's page cache, not in the process's
private memory: a warm cache gives in-memory speed, a cold one gives disk speed.  Successive
products visit the blocks in alternating order (forward, backward, ...), so when ``X`` is larger
than the page cache each pass starts on the blocks the previous one left cached.  The sums
therefore differ between odd and even passes in the last bits (rounding), never more.
"""

from __future__ import annotations

import os

import numpy as np

from rmt.kernels.hessian import default_chunks, dense_hessian, fused_product, preactivations
from rmt.operators.base import SymmetricOperator
from rmt.operators.hessian import finish_product, neuron_rows
from rmt.problem.network import TwoLayerNet
from rmt.validation import as_float_array, check_nonneg_float, check_positive_int

#: Default bytes of ``X`` per block when blocks must be copied (zarr, h5py, non-float64).
DEFAULT_BLOCK_BYTES = 256 * 2**20

#: Default bytes per block when blocks are views (float64 C-order ndarray or memmap): a view
#: costs no private memory, and every block is one parallel region of the kernel, whose
#: threads wait for the slowest one, which on a loaded machine costs a wait per block
#: (benchmarks/RESULTS.md, scale-out section), so views get few, large blocks.
DEFAULT_VIEW_BLOCK_BYTES = 2 * 2**30

#: ``to_dense`` loads an ``X`` up to this size; beyond, it streams products on the identity.
DENSE_MAX_BYTES = 2**30


def open_rows(X):
    """Return ``X`` as a row-sliceable 2-d array: a path to ``.npy`` is memory-mapped.

    Parameters
    ----------
    X : array-like or path-like
        A source of the module docstring.

    Returns
    -------
    row-sliceable 2-d array
        ``X`` itself, or the read-only memmap of the path.

    Raises
    ------
    TypeError
        For an object without ``shape``, ``dtype`` and slicing, or a non-real dtype.
    ValueError
        For a path that does not name an ``.npy`` file, or a non-2-d or empty array.
    """
    if isinstance(X, (str, os.PathLike)):
        path = os.fspath(X)
        if not path.endswith(".npy"):
            raise ValueError(f"X as a path must name an .npy file; got {path!r}")
        X = np.load(path, mmap_mode="r")
    if not all(hasattr(X, a) for a in ("shape", "dtype", "__getitem__")):
        raise TypeError(
            "X must be a numpy array or memmap, a path to an .npy file, or a 2-d array with "
            f"shape, dtype and row slicing (zarr, h5py); got {type(X).__name__}"
        )
    if len(X.shape) != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-d array; got shape {tuple(X.shape)}")
    if np.dtype(X.dtype).kind not in "fiu":
        raise TypeError(f"X must have a real dtype; got {X.dtype}")
    return X


def storage_dtype(X) -> np.dtype:
    """The dtype blocks of ``X`` are read as: float32 for a float32 source (float32 storage),
    else float64."""
    return np.dtype(np.float32 if np.dtype(X.dtype) == np.float32 else np.float64)


def read_rows(X, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo:hi`` of ``X`` as a C-contiguous ndarray of :func:`storage_dtype` (float64, or
    float32 for a float32 source; a view when possible)."""
    blk = np.asarray(X[lo:hi])
    dtype = storage_dtype(X)
    if blk.dtype != dtype or not blk.flags.c_contiguous:
        blk = np.ascontiguousarray(blk, dtype=dtype)
    return blk


class RowData:
    """Samples ``X`` (``n x d``) that may stay out of memory, with their labels ``y`` (``n``).

    What ``StreamingHessian`` and ``DistributedHessian`` take besides an ``rmt.Dataset``: ``X``
    is any source of the module docstring (an ndarray, a memmap, a path to an ``.npy`` file, a
    zarr or h5py array); it is opened by :func:`open_rows`, never loaded.  ``y`` is kept in
    memory as float64.

    Attributes
    ----------
    X : row-sliceable 2-d array
        The opened source (a path becomes a read-only memmap).
    y : ndarray (n,)
    path : str or None
        The ``.npy`` path when ``X`` was given as one (``DistributedHessian`` workers open it).

    Raises
    ------
    TypeError, ValueError
        For an ``X`` that :func:`open_rows` refuses, or a ``y`` of another length.

    Examples
    --------
    >>> import numpy as np
    >>> import rmt
    >>> rows = rmt.RowData(np.zeros((30, 4), dtype=np.float32), np.arange(30))
    >>> rows, rows.n, rows.d, rows.y.dtype, rows.X.dtype
    (RowData(n=30, d=4, X=ndarray), 30, 4, dtype('float64'), dtype('float32'))
    """

    def __init__(self, X, y):
        self.path = os.fspath(X) if isinstance(X, (str, os.PathLike)) else None
        self.X = open_rows(X)
        self.y = as_float_array(y, "y", ndim=1)
        if self.y.shape[0] != self.X.shape[0]:
            raise ValueError(
                f"y must have one label per row of X ({self.X.shape[0]}); got {len(self.y)}"
            )

    n = property(lambda self: int(self.X.shape[0]))
    d = property(lambda self: int(self.X.shape[1]))

    def __repr__(self):
        source = repr(self.path) if self.path else type(self.X).__name__
        return f"RowData(n={self.n}, d={self.d}, X={source})"


def as_row_data(data) -> RowData:
    """``data`` as a :class:`RowData`: itself, or built from its ``X`` and ``y`` (a Dataset)."""
    if isinstance(data, RowData):
        return data
    if not (hasattr(data, "X") and hasattr(data, "y")):
        raise TypeError(
            "data must be an rmt.Dataset, an rmt.RowData or an object with X and y; "
            f"got {type(data).__name__}"
        )
    return RowData(data.X, data.y)


def default_block_rows(X) -> int:
    """Rows per block: ``DEFAULT_VIEW_BLOCK_BYTES`` for views, else ``DEFAULT_BLOCK_BYTES``.

    Blocks of a chunked array (zarr) are a multiple of its row chunks.
    """
    n, d = X.shape
    dtype = storage_dtype(X)
    view = isinstance(X, np.ndarray) and X.dtype == dtype and X.flags.c_contiguous
    block_bytes = DEFAULT_VIEW_BLOCK_BYTES if view else DEFAULT_BLOCK_BYTES
    rows = max(64, block_bytes // (dtype.itemsize * d))
    chunks = getattr(X, "chunks", None)
    if chunks is not None and len(chunks) == 2 and isinstance(chunks[0], (int, np.integer)):
        c = int(chunks[0])
        rows = max(c, (rows // c) * c)
    return int(min(n, rows))


def curvature_by_blocks(net: TwoLayerNet, X, y, W, block_rows: int) -> np.ndarray:
    """``D`` (``n x m x m``) from ``U = X_b W`` block by block; one pass over ``X``.

    Raises ``ValueError`` naming the block when ``X`` has non-finite entries there.
    """
    n = X.shape[0]
    D = np.empty((n, net.width, net.width))
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        blk = read_rows(X, lo, hi)
        U = preactivations(blk, W)
        if not np.all(np.isfinite(U)):
            raise ValueError(f"X must be finite; rows {lo}:{hi} hold NaN or infinite entries")
        D[lo:hi] = net.curvature(U, y[lo:hi])
    return D


def block_product(X, D, Vt, block_rows: int, n_chunks: int, reverse=False) -> np.ndarray:
    """``sum_i x_i r_i^T`` over all rows of ``X``, ``block_rows`` at a time (no ``1/n``).

    Each block goes through ``rmt.kernels.hessian.fused_product``, the dispatch that
    ``rmt.Hessian.matmat`` uses (unrolled kernels for small ``m``); the result has ``Vt``'s shape.
    ``reverse`` visits the blocks last to first.
    """
    n = X.shape[0]
    out = np.zeros(Vt.shape)
    starts = range(0, n, block_rows)
    for lo in reversed(starts) if reverse else starts:
        hi = min(n, lo + block_rows)
        out += fused_product(read_rows(X, lo, hi), D[lo:hi], Vt, n_chunks)
    return out


class StreamingHessian(SymmetricOperator):
    """First-layer Hessian whose products stream ``X`` in row blocks (docs/theory.md section 2).

        H = (1/n) sum_i D_i (x) x_i x_i^T + weight_decay I

    Same arguments and API as ``rmt.Hessian`` (``D``, ``shape``, ``matvec``, ``matmat``,
    ``to_dense``, ``n_matvec``, ``n_passes``); a :class:`rmt.operators.base.SymmetricOperator`, so
    ``rmt.extreme_eigs`` and ``scipy.sparse.linalg.eigsh`` take it.

    Parameters
    ----------
    net : TwoLayerNet
    data : rmt.Dataset, RowData, or any object with ``X`` and ``y``
        ``X`` (``n x d``): an ndarray, memmap, path to ``.npy``, or zarr/h5py array (see the
        module docstring); it is never loaded whole.  ``y`` (``n``) is kept in memory.
    W : array_like (d, m)
        First-layer weights.
    weight_decay : float
    block_rows : int, optional
        Rows per block; default 2 GiB of ``X`` for a float64 or float32 C-order array or
        memmap, whose
        blocks are views, and 256 MiB (aligned to the chunks) for zarr and other copied
        sources.  Private memory is ``D`` plus ``(n_chunks + 2) * b * m * d * 8`` bytes of
        accumulators, plus ``block_rows * d * 8`` bytes (4 for a float32 source) when blocks are
        copied.  The pages of
        a memmap are the operating system's page cache: they show in the RSS, and are
        reclaimable.

    Attributes
    ----------
    data : RowData
        The samples (``data.X`` opened, ``data.y``); ``X`` and ``y`` are the same arrays.

    Raises
    ------
    TypeError, ValueError
        For bad input (a ``net`` that is not an :class:`rmt.TwoLayerNet`, a non-finite
        ``X``, ...).

    Examples
    --------
    In blocks of 64 rows, the products and the dense matrix are those of ``rmt.Hessian``:

    >>> import numpy as np
    >>> import rmt
    >>> data = rmt.MultiIndexModel("phase_retrieval").sample(300, 40, rng=0)
    >>> net = rmt.TwoLayerNet(2, activation="tanh", loss="square")
    >>> W = np.random.default_rng(1).standard_normal((40, 2)) / np.sqrt(40)
    >>> S = rmt.StreamingHessian(net, rmt.RowData(data.X, data.y), W, block_rows=64)
    >>> H = rmt.Hessian(net, data, W)
    >>> v = np.random.default_rng(2).standard_normal(80)
    >>> bool(np.allclose(S @ v, H @ v)), bool(np.allclose(S.to_dense(), H.to_dense()))
    (True, True)
    """

    def __init__(self, net: TwoLayerNet, data, W, weight_decay=0.0, *, block_rows=None):
        if not isinstance(net, TwoLayerNet):
            raise TypeError(f"net must be an rmt.TwoLayerNet; got {type(net).__name__}")
        self.data = as_row_data(data)
        self.X, self.y = self.data.X, self.data.y
        self.n, self.d = self.data.n, self.data.d
        self.net = net
        self.m = net.width
        self.W = net.check_weights(W, self.d)
        self.weight_decay = check_nonneg_float(weight_decay, "weight_decay")
        if block_rows is None:
            block_rows = default_block_rows(self.X)
        self.block_rows = check_positive_int(block_rows, "block_rows")
        self.n_chunks = default_chunks()
        self.D = curvature_by_blocks(net, self.X, self.y, self.W, self.block_rows)
        super().__init__((self.m * self.d, self.m * self.d))

    def __repr__(self):
        return (
            f"StreamingHessian(n={self.n}, d={self.d}, m={self.m}, "
            f"weight_decay={self.weight_decay}, block_rows={self.block_rows})"
        )

    def _matmat(self, V):
        """``H V`` for ``V`` of shape ``(m*d, b)``, in one pass over ``X``."""
        Vt = neuron_rows(V, self.m, self.d)
        # alternate the block order: a file larger than the page cache then rereads from
        # disk only what the previous pass evicted, not all of it (LRU and a cyclic scan)
        # (the pass that computed D went forward, so the first product goes backward)
        reverse = self.n_passes % 2 == 0
        out = block_product(self.X, self.D, Vt, self.block_rows, self.n_chunks, reverse)
        return finish_product(out, Vt, self.m, self.n, self.weight_decay)

    def to_dense(self) -> np.ndarray:
        """Dense ``(m d) x (m d)`` matrix: the reference kernel for ``X`` up to
        ``DENSE_MAX_BYTES`` (it loads ``X``), else products on the identity (streamed)."""
        if self.n * self.d * 8 > DENSE_MAX_BYTES:
            return super().to_dense()
        return dense_hessian(read_rows(self.X, 0, self.n), self.D, self.weight_decay)
