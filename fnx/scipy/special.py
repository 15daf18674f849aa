"""``fnx.scipy.special``: special functions with their derivatives."""
__all__ = []
