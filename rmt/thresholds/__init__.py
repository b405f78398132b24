"""Thresholds: the post-first-phase points, the population threshold ``delta_pop``, the
asymptotic ``delta_NN`` and the statistics of simulated thresholds (docs/theory.md 6-8).
"""
