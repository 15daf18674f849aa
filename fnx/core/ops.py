"""The few operations the transformations apply themselves: adding tangents and
cotangents, materialising and moving batch axes, summing a batch axis out, casting a
Python scalar. They are ``fnx.lax`` functions, but the interpreters (jvp, vjp, vmap, the
tape, custom rules) sit below ``fnx.lax`` (whose rules are written with them), so they
reach these through this module, which ``fnx.lax.ops`` fills in when it defines them."""
from __future__ import annotations

__all__ = ["add", "broadcast_in_dim", "convert_element_type", "transpose", "reduce_sum"]


def _unset(*args, **kwargs):
    raise RuntimeError("fnx.core.ops is filled in by fnx.lax; import fnx first")


add = broadcast_in_dim = convert_element_type = transpose = reduce_sum = _unset
