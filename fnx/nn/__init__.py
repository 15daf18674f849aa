"""``fnx.nn``: neural-network functions (and, later, Modules and layers)."""
from .functions import *  # noqa: F401,F403
