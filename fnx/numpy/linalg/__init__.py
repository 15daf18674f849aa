"""``fnx.numpy.linalg``."""
from ..manipulation import matrix_transpose  # noqa: F401
from ..products import matmul, outer, tensordot, vecdot  # noqa: F401
