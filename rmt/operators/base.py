"""``SymmetricOperator``: the one base of every symmetric operator in ``rmt``.

A subclass implements only ``_matmat(V)`` (``V`` of shape ``(N, b)``, already checked, float64)
and may override ``to_dense()`` with a fast reference assembly.  The base, a scipy
``LinearOperator`` (float64, its own adjoint and transpose), owns everything else:

- the shape, dtype and finiteness checks of every input, in one place;
- the counters ``n_matvec`` (vectors multiplied) and ``n_passes`` (calls of ``_matmat``: a block
  of ``b`` vectors counts ``b`` vectors and one pass, which is one pass over ``X`` for a
  Hessian);
- the declared flag ``symmetric = True``: ``rmt.extreme_eigs`` and ``rmt.spectral_density``
  trust it and spend no products probing the symmetry;
- ``to_dense()``, by default the operator applied to the columns of the identity, in blocks.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from rmt.kernels.threads import adaptive_threads

#: columns of the identity per product in the default ``to_dense``
DENSE_BLOCK = 32


class SymmetricOperator(LinearOperator):
    """A real symmetric ``N x N`` operator: subclasses implement ``_matmat`` only.

    Parameters
    ----------
    shape : tuple
        ``(N, N)`` with ``N >= 1``.

    Attributes
    ----------
    symmetric : bool
        ``True``: the operator declares ``A = A^T`` (a class attribute).
    n_matvec : int
        Vectors multiplied so far (a block of ``b`` counts ``b``).
    n_passes : int
        Calls of ``_matmat`` so far (a block product counts one).
    """

    symmetric = True

    def __init__(self, shape):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
            raise ValueError(f"shape must be (N, N) with N >= 1; got {shape}")
        super().__init__(np.float64, shape)
        self.n_matvec = 0
        self.n_passes = 0

    def _matmat(self, V):
        raise NotImplementedError(f"{type(self).__name__} must implement _matmat")

    def _matvec(self, v):
        return self._matmat(np.reshape(v, (-1, 1))).reshape(-1)

    def _adjoint(self):
        return self

    def _transpose(self):
        return self

    def _checked(self, V, name, vector):
        """``V`` as float64, with its shape (``(N,)``/``(N, 1)`` or ``(N, b)``) and finiteness
        checked."""
        if np.iscomplexobj(V):
            raise TypeError(f"{name} must be real; got dtype {np.asarray(V).dtype}")
        V = np.asarray(V, dtype=np.float64)
        N = self.shape[1]
        if vector and V.shape not in ((N,), (N, 1)):
            raise ValueError(f"{name} must have shape ({N},); got {V.shape}")
        if not vector and (V.ndim != 2 or V.shape[0] != N):
            raise ValueError(f"{name} must have shape ({N}, b); got {V.shape}")
        if not np.all(np.isfinite(V)):
            raise ValueError(f"{name} must be finite")
        return V

    def _counted(self, V):
        """``_matmat(V)`` for a checked ``V`` (``N x b``), counting one pass and ``b`` vectors."""
        if V.shape[1] == 0:
            return np.zeros((self.shape[0], 0))
        out = self._matmat(V)
        self.n_matvec += V.shape[1]
        self.n_passes += 1
        return out

    @adaptive_threads
    def matvec(self, v) -> np.ndarray:
        """``A v`` for ``v`` of shape ``(N,)`` (or ``(N, 1)``, returned as such)."""
        v = self._checked(v, "v", vector=True)
        return self._counted(v.reshape(-1, 1)).reshape(v.shape)

    @adaptive_threads
    def matmat(self, V) -> np.ndarray:
        """``A V`` for ``V`` of shape ``(N, b)``, in one call of ``_matmat``."""
        return self._counted(self._checked(V, "V", vector=False))

    def rmatvec(self, v) -> np.ndarray:
        """``A^T v = A v``."""
        return self.matvec(v)

    def rmatmat(self, V) -> np.ndarray:
        """``A^T V = A V``."""
        return self.matmat(V)

    def as_linear_operator(self) -> LinearOperator:
        """The operator itself: it already is a symmetric float64 scipy ``LinearOperator``."""
        return self

    def to_dense(self) -> np.ndarray:
        """The dense ``N x N`` matrix: ``A`` applied to the identity, ``DENSE_BLOCK`` columns per
        product (counted).  Subclasses override it with a direct assembly."""
        N = self.shape[0]
        out = np.empty((N, N))
        for lo in range(0, N, DENSE_BLOCK):
            hi = min(N, lo + DENSE_BLOCK)
            block = np.zeros((N, hi - lo))
            block[np.arange(lo, hi), np.arange(hi - lo)] = 1.0
            out[:, lo:hi] = self.matmat(block)
        return out
