"""JAX's ``jax.custom_derivatives`` names: user-defined derivative rules
(``fnx.transforms.custom`` holds them)."""
from .transforms.custom import (CustomVJPPrimal, SymbolicZero, custom_jvp,  # noqa: F401
                                custom_vjp, custom_vjp_primal_tree_values, linear_call,
                                zero_from_primal)
