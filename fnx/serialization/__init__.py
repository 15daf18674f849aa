"""Checkpoints: pytrees of arrays to bytes and files, in flax's msgpack format.

Byte streams (the same functions as ``flax.serialization``)::

    data = fnx.serialization.to_bytes(params)            # any pytree
    params = fnx.serialization.from_bytes(params, data)  # into the structure of a target
    tree = fnx.serialization.msgpack_restore(data)       # structure from the data

Files (a checked header around the same stream, written atomically)::

    fnx.serialization.save("ckpt.fnx", params)
    params = fnx.serialization.load("ckpt.fnx", target=params)
    fnx.serialization.save_states("model.fnx", model, aux_states={"epoch": 3, "opt": opt})
    model, aux = fnx.serialization.load_states("model.fnx", model)

The stream
----------
One msgpack value, packed as flax packs it (``strict_types=True``, bin type for
bytes), so ``flax.serialization.msgpack_restore`` reads fnx's streams and
``msgpack_restore`` here reads flax's:

- Containers become maps with string keys: dicts keyed by ``str(key)``, lists
  and tuples by ``"0"``, ``"1"``, ..., namedtuples, dataclasses and other
  registered pytree nodes by their key-path entries (field or attribute name).
  ``None`` is nil; bool, int (64 bits), float (float64), str and bytes are
  msgpack's own types.  Map entries come in pytree order (dict keys sorted, as
  ``fnx.tree_util`` flattens), so equal trees give equal bytes; flax writes
  dicts in insertion order, which readers ignore (the bytes are the same as
  flax's for dicts built in sorted order).
- An array (fnx Array or NumPy array, 0-d included) is **ext type 1** whose
  payload is the msgpack array ``[shape, dtype name, data]``: ``shape`` a
  list of ints (``[]`` for 0-d), the dtype name as NumPy spells it
  (``"float32"``, ``"bfloat16"``, ...), ``data`` a bin of the elements in C
  order, little-endian.  A Python complex is **ext type 2** with payload
  ``[real, imag]``; a NumPy scalar is **ext type 3**, payload as for the
  0-d array.
- An array of more than ``2**30`` bytes becomes the map
  ``{"__msgpack_chunked_array__": true, "shape": {"0": d0, ...},
  "chunks": {"0": <ext 1>, ...}}`` of flat chunks of
  ``max(1, 2**30 // itemsize)`` elements.

Reading never runs code (no pickle): only ext types 1, 2 and 3 and a fixed list of
numeric dtypes (bool, ints, floats, complex, and the ml_dtypes types such as
bfloat16 where ml_dtypes is installed) are accepted, and anything else, like
any malformed, truncated or trailing data, raises `CheckpointError`.  Arrays come
back bit for bit (signed zeros and NaN payloads included).

The file
--------
A 64-byte little-endian header followed by the stream above as the payload:

====== ===== ==========================================================
offset bytes field
====== ===== ==========================================================
0      8     magic ``b"\\x89FNX\\r\\n\\x1a\\n"``
8      4     format version (u32), 1
12     4     header length (u32), 64
16     8     payload length (u64)
24     32    SHA-256 of the payload
56     4     flags (u32), 0
60     4     CRC32 of bytes 0-59
====== ===== ==========================================================

Every future version keeps the magic, the version and the header length in
place and ends its header with the CRC32 of the header's other bytes, so a
newer file is told apart from a corrupt one.  ``load`` checks all of it and
raises `CheckpointError` naming the file and what is wrong (truncated, corrupt
header, checksum mismatch, wrong magic, newer version).  The plain flax stream of
a file is ``open(path, "rb").read()[64:]``.

``save_states`` stores ``{"__fnx_states__": 1, "params": {dotted name: array},
"aux_states": <aux_states as above>, "aux_structure": ...}``, where the dotted
names come from the module's key paths (``blk1.conv1.weight``) and
``aux_structure`` records which aux containers were lists and tuples so that
they come back as such.
"""
from __future__ import annotations

import os

from . import _codec
from ._checkpoint import (FORMAT_VERSION, HEADER_SIZE, MAGIC, CheckpointWarning,
                          atomic_write, decode, read_file, restore_into, restore_states,
                          states_payload, wrap)
from ._codec import CheckpointError

__all__ = ["CheckpointError", "CheckpointWarning", "to_bytes", "from_bytes",
           "msgpack_serialize", "msgpack_restore", "to_state_dict", "save", "load",
           "save_states", "load_states", "MAGIC", "FORMAT_VERSION", "HEADER_SIZE"]


def to_state_dict(tree):
    """The nested-dict form of `tree` that the stream encodes (containers as
    dicts with string keys; array leaves as msgpack ext values)."""
    return _codec.to_state(tree)


def msgpack_serialize(tree) -> bytes:
    """`tree` (any pytree) as a flax-compatible msgpack stream."""
    return _codec.pack(_codec.to_state(tree))


def to_bytes(tree) -> bytes:
    """`tree` (any pytree) as a flax-compatible msgpack stream; the same bytes as
    ``msgpack_serialize`` (flax's ``to_bytes``)."""
    return msgpack_serialize(tree)


def msgpack_restore(data):
    """The tree in `data` with the structure from the data: nested dicts with
    string keys; arrays as read-only NumPy arrays, NumPy scalars, complex and the
    other msgpack values as they are.  Also accepts the bytes of a whole
    checkpoint file (the header is checked).  Raises CheckpointError on bytes
    that are not a valid stream."""
    return decode(data, "<bytes>")


def from_bytes(target, data):
    """The tree in `data` in the structure of `target` (flax's ``from_bytes``).

    Every leaf of `target` must be in `data` and nothing else may be; array
    leaves must have the saved shape and dtype (with ``jax_enable_x64`` off, a
    64-bit entry also loads into an fnx leaf of its 32-bit form, narrowed as any
    64-bit input, as a JAX port that saved float64 expects); all mismatches are
    reported in one CheckpointError by dotted name.  Array leaves come back as the target
    leaf's kind (fnx Array, NumPy array or NumPy scalar); a ``None`` leaf of the
    target takes whatever is stored.  `data` may also be a whole checkpoint
    file's bytes."""
    return restore_into(target, decode(data, "<bytes>"), "<bytes>")


def save(path, tree) -> None:
    """Write `tree` (any pytree) to the checkpoint file `path`, atomically: a
    crash leaves either the old file or the complete new one."""
    payload = msgpack_serialize(tree)
    atomic_write(path, [wrap(payload), payload])


def load(path, target=None):
    """Read the checkpoint file `path`: nested dicts as ``msgpack_restore``
    gives, or, with `target`, the tree in `target`'s structure as
    ``from_bytes`` gives.  Raises CheckpointError for a truncated, corrupt,
    foreign or newer file, or a file that does not fit `target`."""
    state = read_file(path)
    if target is None:
        return state
    return restore_into(target, state, os.fspath(path))


def save_states(path, module, aux_states=None) -> None:
    """Save the leaves of `module` (any pytree, e.g. an ``fnx.nn.Module``) as a
    flat dict ``{dotted name: array}`` together with `aux_states` (epoch,
    learning rate, optimizer state: any pytree of arrays and scalars, stored
    nested), atomically."""
    payload = states_payload(module, aux_states)
    atomic_write(path, [wrap(payload), payload])


def load_states(path, module, strict=True, *, aux_target=None):
    """Load a ``save_states`` file into `module`: ``(module with the loaded
    values, aux_states)``.

    Each leaf of `module` is matched by dotted name.  Entries missing from the
    file, unexpected entries, and entries of the wrong shape or dtype (or,
    for Python scalar leaves, type) are all listed by name in one
    CheckpointError; with ``strict=False`` the matching entries load, the others
    keep the module's values, and a CheckpointWarning lists them.  Loaded arrays
    are fnx Arrays of exactly the module leaf's dtype (no casts), except that with
    ``jax_enable_x64`` off a 64-bit entry loads into a leaf of its 32-bit form (the
    leaf fnx makes from a 64-bit value without the flag), narrowed as any 64-bit input.

    `aux_states` comes back with dicts, lists and tuples as saved (namedtuples
    and other nodes as dicts), arrays as NumPy arrays; pass `aux_target` to
    restore it into that structure instead (strictly, as ``from_bytes``)."""
    state = read_file(path)
    return restore_states(state, module, os.fspath(path), strict=strict,
                          aux_target=aux_target)
