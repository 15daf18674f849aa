"""``gaussian_kde``: kernel density estimation with Gaussian kernels
(``jax.scipy.stats.gaussian_kde``), a pytree."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ... import random
from ... import tree_util
from ...errors import ShapeError
from .. import linalg, special
from ._util import promote_inexact

__all__ = ["gaussian_kde"]


class gaussian_kde:
    """A Gaussian KDE of ``dataset`` (d, n) (a 1-D dataset is (1, n)), with bandwidth
    ``bw_method`` ('scott' (default), 'silverman', a scalar factor or a callable of the
    kde) and optional ``weights`` (n,). The kernel covariance is the (weighted) data
    covariance times the factor squared."""

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = fnp.atleast_2d(fnp.asarray(dataset))
        if dataset.dtype.kind == "c":
            raise NotImplementedError("gaussian_kde: complex data is not supported")
        if not dataset.size > 1:
            raise ValueError("gaussian_kde: dataset should have more than one element")
        d, n = dataset.shape
        if weights is not None:
            dataset, weights = promote_inexact("gaussian_kde", dataset, weights)
            weights = fnp.atleast_1d(weights)
            if weights.ndim != 1 or weights.shape[0] != n:
                raise ShapeError(f"gaussian_kde: weights must be 1-D of length n = {n}, got "
                                 f"shape {weights.shape}")
            weights = weights / fnp.sum(weights)
        else:
            (dataset,) = promote_inexact("gaussian_kde", dataset)
            weights = fnp.full((n,), 1.0 / n, dtype=dataset.dtype)
        neff = 1 / fnp.sum(weights * weights)
        self.neff, self.dataset, self.weights = neff, dataset, weights
        bw = "scott" if bw_method is None else bw_method
        if isinstance(bw, str):
            if bw == "scott":
                factor = neff ** (-1.0 / (d + 4))
            elif bw == "silverman":
                factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
            else:
                raise ValueError("gaussian_kde: bw_method must be 'scott', 'silverman', a "
                                 f"scalar or a callable, got {bw!r}")
        elif callable(bw):
            factor = bw(self)
        elif np.ndim(bw) == 0:
            factor = bw
        else:
            raise ValueError("gaussian_kde: bw_method must be 'scott', 'silverman', a scalar "
                             "or a callable")
        mean = fnp.sum(dataset * weights, axis=1, keepdims=True)
        centred = dataset - mean
        # the unbiased weighted covariance (numpy.cov with aweights, bias=False)
        cov = (centred * weights) @ centred.T / (1 - fnp.sum(weights * weights))
        cov = fnp.atleast_2d(cov)
        self.covariance = cov * factor ** 2
        self.inv_cov = fnp.linalg.inv(cov) / factor ** 2

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def _points(self, points):
        points = fnp.atleast_2d(fnp.asarray(points))
        if points.dtype.kind == "c":
            raise NotImplementedError("gaussian_kde: complex points are not supported")
        d, m = points.shape
        if d != self.d:
            if d == 1 and m == self.d:
                return points.reshape((self.d, 1))
            raise ShapeError(f"gaussian_kde: points have dimension {d}, the dataset {self.d}")
        return points

    def _log_kernels(self, points):
        """(m, n): log of each kernel's weighted density at each point."""
        x = self._points(points)
        white = linalg.cholesky(self.inv_cov, lower=True)
        data = self.dataset.T @ white
        pts = x.T.astype(data.dtype) @ white
        log_norm = (fnp.sum(fnp.log(fnp.diagonal(white)))
                    - 0.5 * self.d * float(np.log(2 * np.pi)))
        diff = pts[:, None, :] - data[None, :, :]
        return log_norm - 0.5 * fnp.sum(diff * diff, axis=-1) + fnp.log(self.weights)

    def evaluate(self, points):
        """The density at ``points`` (d, m) (or (m,) for d = 1)."""
        return fnp.sum(fnp.exp(self._log_kernels(points)), axis=1)

    __call__ = evaluate
    pdf = evaluate

    def logpdf(self, x):
        """The log density, through a log-sum-exp (accurate far from the data)."""
        return special.logsumexp(self._log_kernels(x), axis=1)

    def integrate_gaussian(self, mean, cov):
        """The integral of the KDE times the Gaussian ``N(mean, cov)``."""
        mean = fnp.atleast_1d(fnp.squeeze(fnp.asarray(mean)))
        cov = fnp.atleast_2d(fnp.asarray(cov))
        if mean.shape != (self.d,) or cov.shape != (self.d, self.d):
            raise ShapeError(f"gaussian_kde.integrate_gaussian: mean must be ({self.d},) and "
                             f"cov ({self.d}, {self.d}); got {mean.shape} and {cov.shape}")
        return self._convolve(self.covariance + cov, self.dataset, self.weights, mean)

    def _convolve(self, total_cov, target, weights, mean):
        c = linalg.cho_factor(total_cov)
        norm = (2 * np.pi) ** (self.d / 2) * fnp.prod(fnp.diagonal(c[0]))
        diff = target - mean[:, None]
        alpha = linalg.cho_solve(c, diff)
        return fnp.sum(fnp.exp(-0.5 * fnp.sum(diff * alpha, axis=0)) * weights) / norm

    def integrate_box_1d(self, low, high):
        """The probability mass between ``low`` and ``high`` (scalars; d = 1 only)."""
        if self.d != 1:
            raise ValueError("gaussian_kde.integrate_box_1d: only for 1-D data")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("gaussian_kde.integrate_box_1d: the limits must be scalars")
        sigma = fnp.sqrt(self.covariance[0, 0])
        lo = (low - self.dataset[0]) / sigma
        hi = (high - self.dataset[0]) / sigma
        return fnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other):
        """The integral of the product of two KDEs."""
        if other.d != self.d:
            raise ShapeError("gaussian_kde.integrate_kde: the KDEs' dimensions differ")
        total = self.covariance + other.covariance
        small, large = (self, other) if self.n < other.n else (other, self)
        vals = [self._convolve(total, large.dataset, large.weights, small.dataset[:, i])
                for i in range(small.n)]
        return fnp.sum(fnp.stack(vals) * small.weights)

    def resample(self, key, shape=()):
        """Draws from the KDE: (d, *shape)."""
        shape = tuple(shape) if np.ndim(shape) else (int(shape),) if shape != () else ()
        k1, k2 = random.split(key)
        idx = random.choice(k1, self.n, shape=shape, p=self.weights)
        eps = random.multivariate_normal(k2, fnp.zeros(self.d, dtype=self.covariance.dtype),
                                         self.covariance, shape=shape,
                                         dtype=self.dataset.dtype)
        return self.dataset[:, idx] + fnp.moveaxis(eps, -1, 0)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        raise NotImplementedError("gaussian_kde.integrate_box: only 1-D boxes are supported; "
                                  "use integrate_box_1d")

    def set_bandwidth(self, bw_method=None):
        raise NotImplementedError("gaussian_kde.set_bandwidth: make a new gaussian_kde with "
                                  "the bw_method instead (as in JAX)")


def _flatten(k):
    return (k.neff, k.dataset, k.weights, k.covariance, k.inv_cov), None


def _unflatten(aux, children):
    k = object.__new__(gaussian_kde)
    k.neff, k.dataset, k.weights, k.covariance, k.inv_cov = children
    return k


tree_util.register_pytree_node(gaussian_kde, _flatten, _unflatten)
