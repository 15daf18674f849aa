"""Convolutions and windowed reductions: conv_general_dilated, conv_transpose, reduce_window."""
__all__ = []
