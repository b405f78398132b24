"""The dynamics of training: full-batch gradient descent and its phases, the escape from the
plateau, and the first-phase DMFT (docs/theory.md sections 7-8).
"""
