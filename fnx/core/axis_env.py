"""Named axes: the axes that ``vmap(..., axis_name=...)`` (and ``pmap``) bind while they
trace, which collectives (``lax.psum(x, "batch")``) refer to by name.

A frame records a name, its size and what binds it (``"vmap"``: a batch trace, which
computes the collectives over its batch dimension; ``"pmap"``: processes, which compute
them by message passing). Frames nest; an inner frame of the same name shadows an outer
one, as in JAX.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

from ..errors import UnboundAxisError

__all__ = ["AxisFrame", "axis_frame", "lookup", "axis_names", "size_of", "bound_frames"]


class AxisFrame:
    __slots__ = ("name", "size", "kind", "binder")

    def __init__(self, name, size, kind, binder=None):
        self.name, self.size, self.kind, self.binder = name, int(size), kind, binder

    def __repr__(self):
        return f"AxisFrame({self.name!r}, size={self.size}, {self.kind})"


_FRAMES = contextvars.ContextVar("fnx_axis_frames", default=())


@contextlib.contextmanager
def axis_frame(name, size, kind, binder=None):
    """Bind the axis ``name`` of ``size`` while the block runs."""
    token = _FRAMES.set(_FRAMES.get() + (AxisFrame(name, size, kind, binder),))
    try:
        yield
    finally:
        _FRAMES.reset(token)


def axis_names(axis_name):
    """``axis_name`` (a name or a tuple/list of names) as a tuple of names."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if not names:
        raise UnboundAxisError("a collective needs at least one axis name, got ()")
    return names


def lookup(name, what):
    """The innermost frame binding ``name``; ``UnboundAxisError`` naming ``what`` when
    none does."""
    for frame in reversed(_FRAMES.get()):
        if frame.name == name:
            return frame
    bound = [f.name for f in _FRAMES.get()]
    raise UnboundAxisError(
        f"{what}: unbound axis name {name!r}"
        + (f" (the axes bound here are {bound})" if bound else "")
        + ". Collectives run inside fnx.vmap(f, axis_name=...) or fnx.pmap(f, axis_name=...) "
        "binding that name.")


def size_of(axis_name, what):
    """The size of the named axes (their product for several names)."""
    return math.prod(lookup(n, what).size for n in axis_names(axis_name))


def bound_frames():
    """The frames bound now, outermost first (empty: no named axis is bound)."""
    return _FRAMES.get()
