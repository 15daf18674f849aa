"""``jax.experimental.shard_map``'s old home: ``from fnx.experimental.shard_map import
shard_map`` is ``fnx.shard_map`` (``fnx.sharding.shard_map``)."""
from ..sharding import shard_map

__all__ = ["shard_map"]
