"""Activation, normalization and classification functions (JAX's ``jax.nn``)."""
__all__ = []
