"""Extreme eigenpairs (several solvers) and the stochastic-Lanczos spectral density."""

from rmt.eigen.density import SpectralDensity, spectral_density
from rmt.eigen.overlaps import overlaps
from rmt.eigen.result import EigResult, NoConvergenceError
from rmt.eigen.solvers import METHODS, extreme_eigs

__all__ = [
    "METHODS",
    "EigResult",
    "NoConvergenceError",
    "SpectralDensity",
    "extreme_eigs",
    "overlaps",
    "spectral_density",
]
