"""Kernel modules written by the generators in ``tools/`` (GENERATED, do not edit).

``hvp_small.py`` comes from ``python tools/gen_hvp_small.py`` and ``freeprob_small.py`` from
``python tools/gen_freeprob_small.py``.  Edit the generator, run it and commit both; the
staleness tests (``tests/test_hvp_kernels.py``, ``tests/test_freeprob_kernels.py``) fail when a
committed module's syntax tree differs from what its generator writes now.  Ruff neither lints
nor formats this folder (``pyproject.toml``).
"""
