"""Extreme eigenpairs (several solvers) and the stochastic-Lanczos spectral density."""

from .density import SpectralDensity, spectral_density
from .overlaps import overlaps
from .result import EigResult, NoConvergenceError
from .solvers import METHODS, extreme_eigs

__all__ = [
    "METHODS",
    "EigResult",
    "NoConvergenceError",
    "SpectralDensity",
    "extreme_eigs",
    "overlaps",
    "spectral_density",
]
