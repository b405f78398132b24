"""Symmetric operators on the problem: the operator base, the first-layer Hessian, and its
streamed and distributed forms (docs/theory.md section 2).
"""
