"""JAX's ``jax.ad_checkpoint`` names: rematerialization (``fnx.checkpoint``)."""
from .transforms.custom import (checkpoint, checkpoint_name,  # noqa: F401
                                checkpoint_policies, remat)
