"""Tensor operations on frames: colour conversion, letterbox, normalisation (CPU or GPU)."""
