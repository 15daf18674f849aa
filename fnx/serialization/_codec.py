"""The msgpack encoding of pytrees (flax's wire format) and its decoder.

See the package docstring for the format.  Everything here works on bytes in
memory; files are in ``_checkpoint.py``.
"""
from __future__ import annotations

import math
import sys

import msgpack
import numpy as np

from .. import tree_util
from ..core.array import Array
from ..errors import FnxError

try:  # optional: bfloat16 and the other ml_dtypes types
    import ml_dtypes as _ml_dtypes
except ImportError:  # pragma: no cover - depends on the environment
    _ml_dtypes = None

# Ext type codes, as in flax.serialization.
EXT_NDARRAY = 1
EXT_COMPLEX = 2
EXT_NPSCALAR = 3

# Arrays above this many bytes are split into chunks (msgpack caps one bin at
# 2**31 - 1 bytes).  Read at call time, so tests can lower it.
MAX_CHUNK_SIZE = 2 ** 30
CHUNK_MARKER = "__msgpack_chunked_array__"

_MAX_NDIM = 64  # NumPy's limit


class CheckpointError(FnxError, ValueError):
    """A checkpoint (file or byte stream) cannot be read or does not fit.

    Raised for truncated or corrupt files, a wrong magic string, a format
    version newer than this fnx reads, bytes that are not a valid msgpack
    stream, unknown ext types, and (in ``from_bytes``/``load_states``) entries
    that are missing, unexpected, or of the wrong shape or dtype.  The message
    names the file (or ``<bytes>``) and every offending entry by dotted name::

        params, aux = fnx.serialization.load_states("ckpt.fnx", model)
        # CheckpointError: ckpt.fnx: 1 missing entry (in the module, not in the
        # file): head.bias ...

    Loading what matches and keeping the module's values elsewhere::

        params, aux = fnx.serialization.load_states("ckpt.fnx", model, strict=False)
    """


class _DecodeError(Exception):
    """Raised inside the msgpack ext hook; wrapped in CheckpointError."""


# ---------------------------------------------------------------------------
# dtypes allowed on the wire
# ---------------------------------------------------------------------------

_NUMPY_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float16", "float32", "float64", "complex64", "complex128"]
_DTYPES: dict[str, np.dtype] = {n: np.dtype(n) for n in _NUMPY_NAMES}
for _t in (np.longdouble, np.clongdouble):  # float128/complex256 where they exist
    _DTYPES.setdefault(np.dtype(_t).name, np.dtype(_t))
if _ml_dtypes is not None:
    for _name in ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
                  "float8_e4m3", "float8_e5m2", "float8_e5m2fnuz", "float8_e3m4",
                  "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
                  "int2", "int4", "uint2", "uint4"):
        if hasattr(_ml_dtypes, _name):
            _DTYPES[_name] = np.dtype(getattr(_ml_dtypes, _name))
_ALLOWED = {d: n for n, d in _DTYPES.items()}


def _little_endian(arr: np.ndarray) -> np.ndarray:
    bo = arr.dtype.byteorder
    if bo == ">" or (bo == "=" and sys.byteorder == "big"):
        return arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def _array_payload(arr: np.ndarray, where: str) -> bytes:
    """msgpack of ``[shape, dtype name, C-order little-endian bytes]``."""
    base = arr.dtype.newbyteorder("=") if arr.dtype.byteorder in "<>" else arr.dtype
    if base not in _ALLOWED:
        raise TypeError(f"serialization: cannot store the {arr.dtype} array at {where}: "
                        f"only numeric dtypes ({', '.join(sorted(_DTYPES))}) are "
                        f"supported")
    data = _little_endian(arr).tobytes("C")
    return msgpack.packb([list(arr.shape), _ALLOWED[base], data], use_bin_type=True)


def _dtype_from_name(name) -> np.dtype:
    if isinstance(name, bytes):
        try:
            name = name.decode("ascii")
        except UnicodeDecodeError:
            raise _DecodeError(f"array dtype name {name!r} is not ASCII") from None
    if not isinstance(name, str):
        raise _DecodeError(f"array dtype name must be a string, got {type(name).__name__}")
    d = _DTYPES.get(name)
    if d is None:
        hint = " (install ml_dtypes to read it)" if name.startswith(
            ("bfloat16", "float8", "float6", "float4", "int4", "uint4")) else ""
        raise _DecodeError(f"unsupported array dtype {name!r}{hint}")
    return d


def _array_from_payload(payload: bytes) -> np.ndarray:
    try:
        parts = msgpack.unpackb(payload, raw=True)
    except Exception as e:
        raise _DecodeError(f"malformed array payload ({type(e).__name__}: {e})") from None
    if not isinstance(parts, list) or len(parts) != 3:
        raise _DecodeError("malformed array payload: expected [shape, dtype, data]")
    shape, name, data = parts
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(type(s) is int and s >= 0 for s in shape)):
        raise _DecodeError(f"malformed array shape {shape!r}")
    dtype = _dtype_from_name(name)
    if not isinstance(data, bytes):
        raise _DecodeError("malformed array payload: data is not a byte string")
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise _DecodeError(f"array of shape {tuple(shape)} and dtype {dtype.name} needs "
                           f"{expected} bytes, the stream has {len(data)}")
    arr = np.frombuffer(data, dtype=dtype.newbyteorder("<") if dtype.byteorder == "="
                        else dtype).reshape(shape)
    if arr.dtype != dtype:  # big-endian host: convert to native order
        arr = arr.astype(dtype)
        arr.flags.writeable = False
    return arr


def _ext_hook(code, data):
    if code == EXT_NDARRAY:
        return _array_from_payload(data)
    if code == EXT_NPSCALAR:
        return _array_from_payload(data)[()]
    if code == EXT_COMPLEX:
        try:
            parts = msgpack.unpackb(data)
        except Exception as e:
            raise _DecodeError(f"malformed complex payload ({type(e).__name__})") from None
        if (not isinstance(parts, list) or len(parts) != 2
                or not all(type(p) in (int, float) for p in parts)):
            raise _DecodeError("malformed complex payload: expected [real, imag]")
        return complex(parts[0], parts[1])
    raise _DecodeError(f"unknown msgpack ext type {code} (fnx and flax use 1 array, "
                       f"2 complex, 3 NumPy scalar; nothing else is read)")


# ---------------------------------------------------------------------------
# pytree -> state dict (nested dicts with str keys, leaves ready for msgpack)
# ---------------------------------------------------------------------------

def _path_name(path) -> str:
    return ".".join(path) if path else "<root>"


def _one_level(x):
    """``(node type or None for a leaf, [(str key, child), ...])``."""
    pairs, td = tree_util.tree_flatten_with_path(x, is_leaf=lambda n: n is not x)
    nd = td.node_data()
    if nd is None:
        return None, []
    return nd[0], [(tree_util.dotted_name(p), c) for p, c in pairs]


def encode_leaf(x, path=()):
    """One leaf as a msgpack-ready value (ExtType, chunk dict, or plain)."""
    where = _path_name(path)
    if isinstance(x, Array):
        x = np.asarray(x)  # a tracer raises ConcretizationError here
    if isinstance(x, np.ndarray):
        if x.nbytes > MAX_CHUNK_SIZE:
            return _chunk(x, where)
        return msgpack.ExtType(EXT_NDARRAY, _array_payload(x, where))
    if isinstance(x, np.generic):
        return msgpack.ExtType(EXT_NPSCALAR, _array_payload(np.asarray(x), where))
    if x is None or isinstance(x, bool):
        return None if x is None else bool(x)
    if isinstance(x, int):
        if not -2 ** 63 <= x < 2 ** 64:
            raise TypeError(f"serialization: the int at {where} does not fit in 64 bits "
                            f"(msgpack's limit); store it as a string or an array")
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, complex):
        return msgpack.ExtType(EXT_COMPLEX, msgpack.packb([x.real, x.imag]))
    if isinstance(x, str):
        return str(x)
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    if hasattr(x, "__array__"):
        return encode_leaf(np.asarray(x), path)
    raise TypeError(f"serialization: cannot store the leaf at {where} of type "
                    f"{type(x).__qualname__}; leaves must be arrays, NumPy scalars, "
                    f"None, bool, int, float, complex, str or bytes (register other "
                    f"containers as pytree nodes)")


def _chunk(arr: np.ndarray, where: str) -> dict:
    per = max(1, MAX_CHUNK_SIZE // arr.dtype.itemsize)
    flat = np.ascontiguousarray(arr).reshape(-1)
    chunks = {str(i): msgpack.ExtType(EXT_NDARRAY, _array_payload(flat[s:s + per], where))
              for i, s in enumerate(range(0, flat.size, per))}
    return {CHUNK_MARKER: True, "shape": {str(i): d for i, d in enumerate(arr.shape)},
            "chunks": chunks}


def to_state(tree, path=()):
    """The nested-dict form of any pytree: containers become dicts keyed by the
    string form of their keys (lists/tuples "0", "1", ...), ``None`` stays None."""
    kind, children = _one_level(tree)
    if kind is None:
        return encode_leaf(tree, path)
    if kind is type(None):
        return None
    out = {}
    for k, c in children:
        if k in out:
            raise ValueError(f"serialization: two keys of the node at {_path_name(path)} "
                             f"have the same string form {k!r}")
        out[k] = to_state(c, path + (k,))
    return out


def pack(state) -> bytes:
    return msgpack.packb(state, use_bin_type=True, strict_types=True)


# ---------------------------------------------------------------------------
# bytes -> state
# ---------------------------------------------------------------------------

def unpack(data, source: str):
    """Decode a plain msgpack stream; every failure is a CheckpointError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    try:
        obj = msgpack.unpackb(bytes(data), ext_hook=_ext_hook, raw=False,
                              strict_map_key=False)
        return _unchunk(obj)
    except CheckpointError:
        raise
    except _DecodeError as e:
        raise CheckpointError(f"{source}: {e}") from None
    except RecursionError:
        raise CheckpointError(f"{source}: the stream is nested too deeply") from None
    except Exception as e:  # msgpack's errors: truncation, bad bytes, extra data
        raise CheckpointError(f"{source}: not a valid msgpack stream ({type(e).__name__}: "
                              f"{e}); the data is truncated or corrupt") from None


def _unchunk(obj):
    if isinstance(obj, dict):
        if CHUNK_MARKER in obj:
            return _join_chunks(obj)
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                obj[k] = _unchunk(v)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, (dict, list)):
                obj[i] = _unchunk(v)
    return obj


def _seq(d, what):
    if not isinstance(d, dict) or set(d) != {str(i) for i in range(len(d))}:
        raise _DecodeError(f"malformed chunked array: bad {what}")
    return [d[str(i)] for i in range(len(d))]


def _join_chunks(obj):
    if set(obj) != {CHUNK_MARKER, "shape", "chunks"}:
        raise _DecodeError("malformed chunked array: unexpected keys")
    shape = _seq(obj["shape"], "shape")
    if not all(type(s) is int and s >= 0 for s in shape) or len(shape) > _MAX_NDIM:
        raise _DecodeError(f"malformed chunked array shape {shape!r}")
    chunks = _seq(obj["chunks"], "chunks")
    if (not chunks or not all(isinstance(c, np.ndarray) and c.ndim == 1 for c in chunks)
            or len({c.dtype for c in chunks}) != 1):
        raise _DecodeError("malformed chunked array: chunks must be 1-d arrays of one dtype")
    if sum(c.size for c in chunks) != math.prod(shape):
        raise _DecodeError(f"chunked array of shape {tuple(shape)} has "
                           f"{sum(c.size for c in chunks)} elements")
    arr = np.concatenate(chunks).reshape(shape)
    arr.flags.writeable = False
    return arr
