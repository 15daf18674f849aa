"""``fnx.scipy``: SciPy's names over fnx arrays."""
from . import special  # noqa: F401
