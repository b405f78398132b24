"""The problem: multi-index data models, the two-layer network, Gaussian quadrature and the
classical spiked ensembles (docs/theory.md sections 1-2).
"""
