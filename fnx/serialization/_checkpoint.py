"""Restoring into a target, the checkpoint file format, atomic writes, and
``save_states``/``load_states``.  See the package docstring for the format."""
from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import stat
import struct
import time
import warnings
import zlib

import numpy as np

from .. import tree_util
from ..core import dtypes as _dtypes
from ..core.array import Array
from ..core.primitive import ShapeDtypeStruct
from . import _codec
from ._codec import CheckpointError, _path_name

MAGIC = b"\x89FNX\r\n\x1a\n"
FORMAT_VERSION = 1
# magic, version, header length, payload length, SHA-256 of the payload, flags,
# CRC32 of the header's preceding 60 bytes.
_HEADER = struct.Struct("<8sIIQ32sII")
HEADER_SIZE = _HEADER.size  # 64
_PREAMBLE = struct.Struct("<8sII")  # the part every format version keeps
_MAX_HEADER = 1 << 16
STATES_MARKER = "__fnx_states__"
STATES_LAYOUT = 1


class CheckpointWarning(UserWarning):
    """``load_states(..., strict=False)`` skipped entries that did not match."""


# ---------------------------------------------------------------------------
# header
# ---------------------------------------------------------------------------

def wrap(payload: bytes) -> bytes:
    """The 64-byte header for `payload`."""
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, HEADER_SIZE, len(payload),
                        hashlib.sha256(payload).digest(), 0, 0)[:-4]
    return head + struct.pack("<I", zlib.crc32(head))


def unwrap(data, source: str) -> memoryview:
    """The payload of a checkpoint file's bytes, after checking the header,
    the length and the checksum."""
    data = memoryview(data).cast("B")
    n = len(data)
    if bytes(data[:len(MAGIC)]) != MAGIC:
        if n < len(MAGIC) and MAGIC.startswith(bytes(data)):
            raise CheckpointError(f"{source}: truncated: the file has {n} bytes, the "
                                  f"header alone has {HEADER_SIZE}")
        hint = ""
        if n and (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):
            hint = (" It looks like a plain msgpack stream (flax's format): read it "
                    "with fnx.serialization.msgpack_restore(data) or from_bytes(target, "
                    "data).")
        raise CheckpointError(f"{source}: not an fnx checkpoint (wrong magic string: the "
                              f"file starts with {bytes(data[:8])!r}, expected {MAGIC!r}); "
                              f"the file is of another kind or its first bytes are "
                              f"corrupt.{hint}")
    if n < _PREAMBLE.size:
        raise CheckpointError(f"{source}: truncated: the file has {n} bytes, the header "
                              f"alone has {HEADER_SIZE}")
    _, version, header_len = _PREAMBLE.unpack_from(data)
    if not _PREAMBLE.size + 4 <= header_len <= _MAX_HEADER:
        raise CheckpointError(f"{source}: corrupt header (header length {header_len})")
    if n < header_len:
        raise CheckpointError(f"{source}: truncated (or corrupt header): the header needs "
                              f"{header_len} bytes, the file has {n}")
    (crc,) = struct.unpack_from("<I", data, header_len - 4)
    if zlib.crc32(data[:header_len - 4]) != crc:
        raise CheckpointError(f"{source}: corrupt header (CRC32 mismatch)")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{source}: written in checkpoint format version {version}, "
                              f"newer than this fnx reads ({FORMAT_VERSION}); upgrade fnx "
                              f"to load it")
    if version != FORMAT_VERSION or header_len != HEADER_SIZE:
        raise CheckpointError(f"{source}: unsupported checkpoint format version {version} "
                              f"(header length {header_len})")
    _, _, _, length, digest, flags, _ = _HEADER.unpack_from(data)
    if flags != 0:
        raise CheckpointError(f"{source}: unsupported header flags {flags:#x}")
    have = n - header_len
    if have < length:
        raise CheckpointError(f"{source}: truncated: the payload has {have} of its "
                              f"{length} bytes")
    if have > length:
        raise CheckpointError(f"{source}: corrupt: {have - length} unexpected bytes "
                              f"after the {length}-byte payload")
    payload = data[header_len:]
    if hashlib.sha256(payload).digest() != digest:
        raise CheckpointError(f"{source}: corrupt: the payload's SHA-256 checksum does "
                              f"not match the header")
    return payload


def decode(data, source: str):
    """State (nested dicts) of a plain stream or of a whole checkpoint file."""
    if bytes(data[:len(MAGIC)]) == MAGIC:
        data = unwrap(data, source)
    return _codec.unpack(data, source)


def read_file(path):
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    return _codec.unpack(unwrap(data, path), path)


# ---------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------

def _fsync_dir(directory: str) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Temporaries are named ``.{target}.{host}-{pid}.{random}.tmp``: a save that dies (SIGKILL,
# power loss) leaves one behind, and the next save of the same target removes it once
# its writer is known to be gone: a process of this host that no longer exists, or, for
# a temporary of another host (a shared file system) or of an older naming, one nobody
# has written to for ``STALE_TMP_SECONDS`` (a live writer writes without pause and
# renames at once). A live writer's temporary, this process's included, is never touched.
STALE_TMP_SECONDS = 600
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _tmp_prefix(path: str) -> str:
    return f".{os.path.basename(path)}."


def _pid_gone(pid: int) -> bool:
    if os.name != "posix" or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def remove_stale_temporaries(path) -> list:
    """Remove the temporaries that interrupted saves of ``path`` left behind (see above);
    returns the names removed."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = _tmp_prefix(path)
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        middle = name[len(prefix):-len(".tmp")].split(".")
        full = os.path.join(directory, name)
        if len(middle) == 2 and middle[0].count("-") == 1:  # this naming: host-pid.random
            host, pid = middle[0].split("-")
        elif len(middle) == 1 and len(middle[0]) == 12:     # the earlier one: random only
            host = pid = ""
        else:  # another target's (``path`` is a prefix of its name), or not a temporary
            continue
        if host == _HOST and pid.isdigit():
            stale = int(pid) != os.getpid() and _pid_gone(int(pid))
        else:
            try:
                stale = now - os.stat(full).st_mtime > STALE_TMP_SECONDS
            except OSError:
                continue
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(full)
                removed.append(name)
    return removed


def atomic_write(path, parts) -> None:
    """Write `parts` to `path` so that a reader (or a crash) sees either the old
    file or the complete new one: a temporary file in the same directory,
    flushed and fsynced, then ``os.replace``, then an fsync of the directory.
    Temporaries that earlier, interrupted saves of `path` left are removed first."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temporaries(path)
    tmp = os.path.join(directory, f"{_tmp_prefix(path)}{_HOST}-{os.getpid()}."
                                  f"{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(OSError):  # keep an existing file's permissions
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


# ---------------------------------------------------------------------------
# restoring leaves into a target
# ---------------------------------------------------------------------------

def _describe(x) -> str:
    if isinstance(x, (np.ndarray, np.generic, Array, ShapeDtypeStruct)):
        return f"{np.dtype(x.dtype).name}{list(x.shape)}"
    if isinstance(x, dict):
        return "a subtree"
    return type(x).__name__


def _is_arraylike(x) -> bool:
    return isinstance(x, (Array, np.ndarray, np.generic, ShapeDtypeStruct))


def _to_fnx(arr, weak_type=False):
    arr = np.asarray(arr)
    if arr.dtype not in _dtypes.SUPPORTED_SET:
        return arr
    if arr.flags.writeable:
        arr = arr.copy()
        arr.flags.writeable = False
    return Array._wrap(arr, weak_type)


def restore_leaf(target, stored, *, as_fnx=False, what="target"):
    """``(value, None)`` or ``(None, what is wrong)``."""
    if target is None:
        return stored, None
    if _is_arraylike(target):
        if not isinstance(stored, (np.ndarray, np.generic)):
            return None, f"file has {_describe(stored)}, {what} has {_describe(target)}"
        to_fnx = as_fnx or not isinstance(target, (np.ndarray, np.generic))
        if (to_fnx and not _dtypes.x64_enabled() and tuple(stored.shape) == tuple(target.shape)
                and _dtypes.NARROWING.get(np.dtype(stored.dtype)) == np.dtype(target.dtype)):
            # A 64-bit entry loading into an fnx leaf with x64 off: the leaf is the
            # 32-bit form fnx (like JAX) makes of any 64-bit input, so the value narrows
            # the same way (warned once, naming the flag) instead of failing to load.
            stored = _dtypes.narrow_value(np.asarray(stored), where="loading a checkpoint")
        if (tuple(stored.shape) != tuple(target.shape)
                or np.dtype(stored.dtype) != np.dtype(target.dtype)):
            why = f"file has {_describe(stored)}, {what} has {_describe(target)}"
            if (_dtypes.x64_enabled() and np.dtype(stored.dtype) in _dtypes.NARROWING.values()
                    and _dtypes.NARROWING.get(np.dtype(target.dtype)) == stored.dtype):
                why += (" (saved with jax_enable_x64 off? build the target with the file's "
                        "dtype, or load with the flag off)")
            elif (not _dtypes.x64_enabled() and np.dtype(stored.dtype) in _dtypes.NARROWING
                    and tuple(stored.shape) == tuple(target.shape)):
                why += (" (with jax_enable_x64 off a 64-bit entry narrows into an fnx leaf "
                        "of the 32-bit dtype; a NumPy leaf must have the file's dtype)")
            return None, why
        if isinstance(target, np.generic) and not as_fnx:
            return np.asarray(stored)[()], None
        if isinstance(target, np.ndarray) and not as_fnx:
            return np.array(stored), None
        return _to_fnx(stored, bool(getattr(target, "weak_type", False))), None
    if isinstance(target, (bool, int, float, complex, str, bytes)):
        if type(stored) is not type(target):
            return None, f"file has {_describe(stored)}, {what} has {_describe(target)}"
        return stored, None
    if isinstance(stored, dict):
        return None, f"file has a subtree, {what} has {_describe(target)}"
    return stored, None


def _state_leaves(state, path=()):
    if isinstance(state, dict):
        for k, v in state.items():
            yield from _state_leaves(v, path + (str(k),))
    elif isinstance(state, list):
        for i, v in enumerate(state):
            yield from _state_leaves(v, path + (str(i),))
    else:
        yield path, state


def _lookup(state, path):
    node = state
    for k in path:
        if isinstance(node, dict) and k in node:
            node = node[k]
        elif isinstance(node, list) and k.isdigit() and int(k) < len(node):
            node = node[int(k)]
        else:
            return False, None
    return True, node


def _report(source, what, missing, unexpected, mismatched, strict):
    lines = [f"{source}: the checkpoint does not match the {what}:"]
    if missing:
        lines.append(f"  {len(missing)} missing (in the {what}, not in the file): "
                     + ", ".join(missing))
    if unexpected:
        lines.append(f"  {len(unexpected)} unexpected (in the file, not in the {what}): "
                     + ", ".join(unexpected))
    if mismatched:
        lines.append(f"  {len(mismatched)} with the wrong shape, dtype or type:")
        lines.extend(f"    {n}: {why}" for n, why in mismatched)
    if strict:
        lines.append("  (load_states(..., strict=False) loads the matching entries and "
                     "keeps the target's values for the rest)" if what == "module" else
                     "  (the target must have the saved structure, shapes and dtypes)")
    return "\n".join(lines)


def restore_into(target, state, source: str, what: str = "target"):
    """`target`'s structure with the values of `state` (nested dicts), strictly."""
    pairs, treedef = tree_util.tree_flatten_with_path(target, is_leaf=lambda x: x is None)
    missing, mismatched, leaves, consumed = [], [], [], set()
    for kp, leaf in pairs:
        path = tuple(tree_util.dotted_name((k,)) for k in kp)
        found, stored = _lookup(state, path)
        if not found:
            missing.append(_path_name(path))
            leaves.append(leaf)
            continue
        consumed.add(path)
        value, why = restore_leaf(leaf, stored, what=what)
        if why is not None:
            mismatched.append((_path_name(path), why))
        leaves.append(value)
    unexpected = [_path_name(p) for p, _ in _state_leaves(state)
                  if not any(p[:i] in consumed for i in range(len(p) + 1))]
    if missing or unexpected or mismatched:
        raise CheckpointError(_report(source, what, missing, unexpected, mismatched, True))
    return tree_util.tree_unflatten(treedef, leaves)


# ---------------------------------------------------------------------------
# aux structure: lists and tuples restored without a target
# ---------------------------------------------------------------------------

def structure_of(tree):
    """nil for a leaf, else ``[kind, {key: child structure}]`` (kind "list",
    "tuple" or "dict"; namedtuples and custom nodes are recorded as "dict")."""
    kind, children = _codec._one_level(tree)
    if kind is None or kind is type(None):
        return None
    name = "list" if kind is list else "tuple" if kind is tuple else "dict"
    return [name, {k: structure_of(c) for k, c in children}]


def apply_structure(state, struct):
    if not (isinstance(struct, list) and len(struct) == 2 and isinstance(state, dict)
            and isinstance(struct[1], dict)):
        return state
    kind, children = struct
    out = {k: apply_structure(v, children.get(k)) for k, v in state.items()}
    if kind in ("list", "tuple") and set(out) == {str(i) for i in range(len(out))}:
        seq = [out[str(i)] for i in range(len(out))]
        return seq if kind == "list" else tuple(seq)
    return out


# ---------------------------------------------------------------------------
# named states (modules)
# ---------------------------------------------------------------------------

def flat_named(module, what="module"):
    pairs, treedef = tree_util.tree_flatten_with_path(module)
    names = [tree_util.dotted_name(kp) for kp, _ in pairs]
    seen, dups = set(), set()
    for n in names:
        (dups if n in seen else seen).add(n)
    if dups:
        raise ValueError(f"save_states/load_states: several leaves of the {what} have the "
                         f"same dotted name: {', '.join(sorted(dups))}; rename the keys "
                         f"(a dict key containing '.' can collide with a nested path)")
    return names, [leaf for _, leaf in pairs], [kp for kp, _ in pairs], treedef


def states_payload(module, aux_states) -> bytes:
    names, leaves, kps, _ = flat_named(module)
    params = {}
    for n, leaf, kp in zip(names, leaves, kps):
        params[n] = _codec.encode_leaf(
            leaf, tuple(tree_util.dotted_name((k,)) for k in kp))
    state = {STATES_MARKER: STATES_LAYOUT, "params": params,
             "aux_states": _codec.to_state(aux_states),
             "aux_structure": structure_of(aux_states)}
    return _codec.pack(state)


def restore_states(state, module, source, strict=True, aux_target=None):
    if (not isinstance(state, dict) or state.get(STATES_MARKER) != STATES_LAYOUT
            or not isinstance(state.get("params"), dict)):
        raise CheckpointError(f"{source}: not a save_states checkpoint (no "
                              f"{STATES_MARKER!r} entry of layout {STATES_LAYOUT}); a file "
                              f"written by save() is read with load(path, target)")
    params = state["params"]
    names, leaves, _, treedef = flat_named(module)
    missing, mismatched, out = [], [], []
    for n, leaf in zip(names, leaves):
        label = n or "<root>"
        if n not in params:
            missing.append(label)
            out.append(leaf)
            continue
        value, why = restore_leaf(leaf, params[n], as_fnx=True, what="module")
        if why is not None:
            mismatched.append((label, why))
            out.append(leaf)
        else:
            out.append(value)
    known = set(names)
    unexpected = [str(k) or "<root>" for k in params if k not in known]
    if missing or unexpected or mismatched:
        msg = _report(source, "module", missing, unexpected, mismatched, strict)
        if strict:
            raise CheckpointError(msg)
        warnings.warn(msg + "\n  (strict=False: these keep the module's values)",
                      CheckpointWarning, stacklevel=3)
    aux = state.get("aux_states")
    if aux_target is not None:
        aux = restore_into(aux_target, aux, source, what="aux_target")
    else:
        aux = apply_structure(aux, state.get("aux_structure"))
    return tree_util.tree_unflatten(treedef, out), aux
