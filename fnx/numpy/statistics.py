"""Statistics beyond the reductions: median, quantiles, nan-aware reductions."""
