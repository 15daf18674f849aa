"""fnx.serialization: flax-compatible msgpack streams, checked checkpoint files,
atomic saves, named module states."""
import collections
import os
import random
import struct
import warnings
import zlib

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
import fnx.serialization as ser
from fnx import tree_util
from fnx.serialization import _checkpoint as _ckpt, _codec, CheckpointError
from fnx.testing import strategies as fst

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

needs_bf16 = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes not installed")


# --- helpers ------------------------------------------------------------------

def assert_same(a, b, where="root"):
    """Same structure, leaf types, dtypes, shapes and bytes (NaN payloads and -0.0)."""
    la, ta = tree_util.tree_flatten(a)
    lb, tb = tree_util.tree_flatten(b)
    assert ta == tb, f"{where}: {ta} != {tb}"
    for x, y in zip(la, lb):
        assert type(x) is type(y), (type(x), type(y))
        if isinstance(x, (fnx.Array, np.ndarray, np.generic)):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape
            assert x.tobytes() == y.tobytes()
        elif isinstance(x, float):
            assert struct.pack("<d", x) == struct.pack("<d", y)
        elif isinstance(x, complex):
            assert struct.pack("<dd", x.real, x.imag) == struct.pack("<dd", y.real, y.imag)
        else:
            assert x == y


def plain_state(tree):
    """What msgpack_restore should give: containers as str-keyed dicts (in pytree order:
    sorted keys), arrays as NumPy."""
    if isinstance(tree, dict):
        return {str(k): plain_state(v) for k, v in sorted(tree.items())}
    if isinstance(tree, (list, tuple)):
        return {str(i): plain_state(v) for i, v in enumerate(tree)}
    if isinstance(tree, fnx.Array):
        return np.asarray(tree)
    return tree


# A reference encoder written from the format notes (what flax does).
def ref_pack_array(a):
    return msgpack.packb((a.shape, a.dtype.name, a.tobytes("C")), use_bin_type=True)


def ref_ext_pack(x):
    if isinstance(x, np.ndarray):
        return msgpack.ExtType(1, ref_pack_array(x))
    if isinstance(x, np.generic):
        return msgpack.ExtType(3, ref_pack_array(np.asarray(x)))
    if isinstance(x, complex):
        return msgpack.ExtType(2, msgpack.packb((x.real, x.imag)))
    return x


def ref_packb(state):
    return msgpack.packb(state, default=ref_ext_pack, strict_types=True)


# --- hypothesis trees -------------------------------------------------------------

ARRAY_DTYPES = fst.dtypes("fbiuc", include_float16=True, include_bfloat16=True)
np_arrays = fst.arrays(ARRAY_DTYPES, fst.shapes(min_dims=0, max_dims=3, min_side=0,
                                                max_side=3),
                       min_value=-np.inf, max_value=np.inf, allow_nan=True,
                       allow_infinity=True, allow_subnormal=True)
leaves = st.one_of(
    np_arrays,
    np_arrays.map(fnp.asarray),
    np_arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()]),  # NumPy scalars
    st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 64 - 1),
    st.floats(allow_nan=True), st.complex_numbers(allow_nan=True), st.text(max_size=5),
    st.binary(max_size=5))
trees = st.recursive(
    leaves,
    lambda c: st.one_of(st.lists(c, max_size=3), st.lists(c, max_size=3).map(tuple),
                        st.dictionaries(st.text(max_size=4), c, max_size=3)),
    max_leaves=8)


@settings(deadline=None)
@given(trees)
def test_round_trip_hypothesis(tree):
    data = ser.to_bytes(tree)
    assert data == ser.msgpack_serialize(tree)
    assert_same(ser.from_bytes(tree, data), tree)
    assert_same(ser.msgpack_restore(data), plain_state(tree))
    # the encoding is flax's, byte for byte
    assert data == ref_packb(plain_state(tree))


@settings(deadline=None)
@given(trees)
def test_file_round_trip_hypothesis(tree):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.fnx")
        ser.save(path, tree)
        assert_same(ser.load(path, tree), tree)
        assert_same(ser.load(path), plain_state(tree))
        with open(path, "rb") as f:
            raw = f.read()
        assert raw[ser.HEADER_SIZE:] == ser.to_bytes(tree)


def _raw_floats(dtype, seed):
    rng = np.random.default_rng(seed)
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    bits = rng.integers(0, np.iinfo(itype).max, size=64, dtype=itype, endpoint=True)
    return bits.view(dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64",
                                   pytest.param("bfloat16", marks=needs_bf16)])
def test_bit_exact_arrays(dtype):
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    base = {"complex64": np.float32}.get(dtype, dt)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], dtype=np.float32).astype(base)
    nan_payloads = _raw_floats(base, 0)  # many NaNs with arbitrary payloads
    vals = np.concatenate([special, nan_payloads])
    if dtype == "complex64":
        vals = vals.view(np.complex64)
    tree = {"v": vals, "m": vals[:6].reshape(2, 3), "z": vals[1].reshape(()),
            "e": np.zeros((0, 3), dt), "s": vals[1], "f": fnp.asarray(vals)}
    out = ser.from_bytes(tree, ser.to_bytes(tree))
    assert_same(out, tree)
    if dtype != "complex64":
        assert np.signbit(np.asarray(out["z"]))


def test_python_float_nan_payload_and_negative_zero():
    nan = struct.unpack("<d", bytes.fromhex("0100000000f8ff7f"))[0]
    tree = {"n": nan, "z": -0.0, "c": complex(-0.0, nan)}
    assert_same(ser.from_bytes(tree, ser.to_bytes(tree)), tree)


def test_fnx_arrays_and_kinds_restored_like_target():
    tree = {"a": fnp.ones((2, 2), dtype="float32"), "n": np.arange(3), "s": np.int8(3),
            "zero_d": fnp.asarray(2.5)}
    out = ser.from_bytes(tree, ser.to_bytes(tree))
    assert type(out["a"]) is fnx.Array and out["a"].dtype == np.float32
    assert type(out["n"]) is np.ndarray and out["n"].flags.writeable
    assert type(out["s"]) is np.int8
    assert type(out["zero_d"]) is fnx.Array and out["zero_d"].shape == ()
    # the restored fnx array computes
    assert float((out["a"] * 2).sum()) == 8.0


# --- the wire format, checked with plain msgpack -------------------------------------

def test_encoding_decoded_with_plain_msgpack():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    tree = {"w": fnp.asarray(w), "c": 1 + 2j, "s": np.int16(7), "l": [1, None], "t": ("x",),
            "z": np.asarray(3.0), "e": np.zeros((0,), np.int32)}
    raw = msgpack.unpackb(ser.to_bytes(tree), raw=False, strict_map_key=False)
    assert set(raw) == {"w", "c", "s", "l", "t", "z", "e"}
    assert raw["l"] == {"0": 1, "1": None} and raw["t"] == {"0": "x"}
    ext = raw["w"]
    assert isinstance(ext, msgpack.ExtType) and ext.code == 1
    assert msgpack.unpackb(ext.data, raw=True) == [[2, 3], b"float32", w.tobytes("C")]
    assert ext.data == msgpack.packb(((2, 3), "float32", w.tobytes()), use_bin_type=True)
    assert raw["c"].code == 2 and msgpack.unpackb(raw["c"].data) == [1.0, 2.0]
    assert raw["s"].code == 3
    assert msgpack.unpackb(raw["s"].data, raw=True) == [[], b"int16", b"\x07\x00"]
    assert msgpack.unpackb(raw["z"].data, raw=True)[0] == []  # 0-d stays 0-d
    assert msgpack.unpackb(raw["e"].data, raw=True) == [[0], b"int32", b""]


@needs_bf16
def test_bfloat16_encoding():
    a = np.array([1.0, -0.0, 3.5], dtype=ml_dtypes.bfloat16)
    raw = msgpack.unpackb(ser.to_bytes({"a": a}))
    assert msgpack.unpackb(raw["a"].data, raw=True) == [[3], b"bfloat16", a.tobytes()]
    out = ser.msgpack_restore(ser.to_bytes({"a": a}))["a"]
    assert out.dtype == a.dtype and out.tobytes() == a.tobytes()


@pytest.mark.parametrize("x64", [False, True])
def test_reads_streams_written_the_flax_way(x64):
    w = np.arange(12, dtype=np.float64).reshape(3, 4)
    state = {"params": {"w": w, "b": np.float32(0.5)}, "step": 3, "c": 1j,
             "raw_list": [1, 2], "nested": {"0": {"x": w[0]}}}
    data = ref_packb(state)
    out = ser.msgpack_restore(data)
    assert out["raw_list"] == [1, 2] and out["c"] == 1j and out["step"] == 3
    np.testing.assert_array_equal(out["params"]["w"], w)
    assert type(out["params"]["b"]) is np.float32
    with fnx.enable_x64(x64):   # x64 off: the float64 target is float32, and w narrows
        target = {"params": {"w": fnp.zeros((3, 4), dtype="float64"), "b": np.float32(0)},
                  "step": 0, "c": 0j, "raw_list": [0, 0], "nested": [{"x": np.zeros(4)}]}
        got = ser.from_bytes(target, data)
    assert type(got["params"]["w"]) is fnx.Array and got["nested"][0]["x"][3] == 3.0
    assert got["params"]["w"].dtype == (np.float64 if x64 else np.float32)
    np.testing.assert_array_equal(got["params"]["w"], w)
    assert got["nested"][0]["x"].dtype == np.float64     # NumPy leaves keep the file's dtype


def test_chunked_arrays(monkeypatch):
    monkeypatch.setattr(_codec, "MAX_CHUNK_SIZE", 16)
    a = np.arange(10, dtype=np.float32).reshape(2, 5)       # 40 bytes > 16
    small = np.arange(4, dtype=np.float32)                   # 16 bytes: not chunked
    data = ser.to_bytes({"a": a, "small": small, "top": [a]})
    raw = msgpack.unpackb(data)
    assert raw["small"].code == 1
    ch = raw["a"]
    assert ch["__msgpack_chunked_array__"] is True and ch["shape"] == {"0": 2, "1": 5}
    sizes = [msgpack.unpackb(ch["chunks"][str(i)].data)[0] for i in range(len(ch["chunks"]))]
    assert sizes == [[4], [4], [2]]
    out = ser.msgpack_restore(data)
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["top"]["0"], a)
    # the same chunk layout written the flax way reads back
    flax_style = {"a": {"__msgpack_chunked_array__": True, "shape": {"0": 2, "1": 5},
                        "chunks": {"0": a.reshape(-1)[:4], "1": a.reshape(-1)[4:8],
                                   "2": a.reshape(-1)[8:]}}}
    assert ref_packb(flax_style) == ser.to_bytes({"a": a})
    # a chunk map that does not add up is an error
    bad = dict(flax_style["a"], shape={"0": 3, "1": 5})
    with pytest.raises(CheckpointError, match="chunked"):
        ser.msgpack_restore(ref_packb({"a": bad}))


def test_with_flax_when_installed(tmp_path):
    flax_ser = pytest.importorskip("flax.serialization")
    tree = {"c": 1 + 1j, "l": [np.zeros(()), "x"], "s": np.int32(2),   # keys sorted:
            "w": np.arange(6, dtype=np.float32).reshape(2, 3)}       # flax keeps insertion order
    ours = flax_ser.msgpack_restore(ser.to_bytes(tree))
    np.testing.assert_array_equal(ours["w"], tree["w"])
    assert ours["l"]["1"] == "x" and ours["c"] == 1 + 1j
    theirs = ser.msgpack_restore(flax_ser.to_bytes(tree))
    np.testing.assert_array_equal(theirs["w"], tree["w"])
    assert ser.to_bytes(tree) == flax_ser.to_bytes(tree)
    ser.save(tmp_path / "f.fnx", tree)
    payload = (tmp_path / "f.fnx").read_bytes()[ser.HEADER_SIZE:]
    assert flax_ser.msgpack_restore(payload)["s"] == 2


# --- nothing but data is read ---------------------------------------------------

@pytest.mark.parametrize("bad", [
    msgpack.packb({"x": msgpack.ExtType(7, b"\x00")}),                      # unknown ext
    msgpack.packb({"x": msgpack.ExtType(1, msgpack.packb([[1], "object", b"\0" * 8]))}),
    msgpack.packb({"x": msgpack.ExtType(1, msgpack.packb([[2], "float32", b"\0" * 4]))}),
    msgpack.packb({"x": msgpack.ExtType(1, msgpack.packb([[-1], "float32", b""]))}),
    msgpack.packb({"x": msgpack.ExtType(1, b"\xc1")}),
    msgpack.packb({"x": msgpack.ExtType(2, msgpack.packb(["a", 1]))}),
    msgpack.packb({"x": 1}) + b"\x00",                                      # trailing data
    b"", b"\xc1", b"\x81",
])
def test_malformed_streams_raise_checkpoint_error(bad):
    with pytest.raises(CheckpointError, match="<bytes>"):
        ser.msgpack_restore(bad)
    with pytest.raises(CheckpointError):
        ser.from_bytes({"x": np.zeros(2, np.float32)}, bad)


def test_unsupported_leaves_are_refused():
    with pytest.raises(TypeError, match="a.0"):
        ser.to_bytes({"a": [object()]})
    with pytest.raises(TypeError, match="object"):
        ser.to_bytes({"a": np.array([None])})
    with pytest.raises(TypeError, match="64 bits"):
        ser.to_bytes({"a": 2 ** 70})


# --- corruption of files ------------------------------------------------------------

def _small_file(tmp_path):
    path = tmp_path / "small.fnx"
    ser.save(path, {"w": np.arange(3, dtype=np.float32), "b": 1.5, "s": "hi"})
    return path, path.read_bytes()


def test_truncated_at_every_position(tmp_path):
    path, good = _small_file(tmp_path)
    bad = tmp_path / "bad.fnx"
    for n in range(len(good)):
        bad.write_bytes(good[:n])
        with pytest.raises(CheckpointError, match="bad.fnx"):
            ser.load(bad)
        with pytest.raises(CheckpointError):
            ser.from_bytes({"w": np.zeros(3, np.float32), "b": 0.0, "s": ""}, good[:n])
    payload = good[ser.HEADER_SIZE:]
    for n in range(len(payload)):  # the plain stream truncated
        with pytest.raises(CheckpointError):
            ser.msgpack_restore(payload[:n])


def test_flipped_bytes_at_random_positions(tmp_path):
    path, good = _small_file(tmp_path)
    rng = random.Random(1234)
    bad = tmp_path / "bad.fnx"
    for _ in range(400):
        data = bytearray(good)
        pos = rng.randrange(len(data))
        data[pos] ^= rng.randrange(1, 256)
        bad.write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match="bad.fnx"):
            ser.load(bad)
        with pytest.raises(CheckpointError):
            ser.load(bad, {"w": np.zeros(3, np.float32), "b": 0.0, "s": ""})
    # every single position, too (one flip each)
    for pos in range(len(good)):
        data = bytearray(good)
        data[pos] ^= 0x01
        with pytest.raises(CheckpointError):
            ser.msgpack_restore(bytes(data))


def test_flipped_bytes_in_plain_stream_never_crash():
    good = ser.to_bytes({"w": np.arange(3, dtype=np.float32), "b": [1, "x"], "c": 1j})
    rng = random.Random(99)
    for _ in range(300):
        data = bytearray(good)
        data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
        try:
            ser.msgpack_restore(bytes(data))
        except CheckpointError:
            pass


def test_wrong_magic_future_version_and_trailing_bytes(tmp_path):
    path, good = _small_file(tmp_path)
    p = tmp_path / "x.fnx"
    p.write_bytes(b"PK\x03\x04" + good[4:])
    with pytest.raises(CheckpointError, match="wrong magic"):
        ser.load(p)
    p.write_bytes(ser.to_bytes({"a": 1}))
    with pytest.raises(CheckpointError, match="plain msgpack stream"):
        ser.load(p)
    future = bytearray(good)
    future[8:12] = struct.pack("<I", 2)
    future[60:64] = struct.pack("<I", zlib.crc32(bytes(future[:60])))
    p.write_bytes(bytes(future))
    with pytest.raises(CheckpointError, match="version 2, newer"):
        ser.load(p)
    flipped = bytearray(good)
    flipped[8] ^= 0x02          # same version field, but without a valid CRC: corrupt
    p.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupt header"):
        ser.load(p)
    p.write_bytes(good + b"\x00")
    with pytest.raises(CheckpointError, match="unexpected bytes"):
        ser.load(p)
    p.write_bytes(good[:-1])
    with pytest.raises(CheckpointError, match="truncated"):
        ser.load(p)


# --- atomic writes ------------------------------------------------------------------

@pytest.mark.parametrize("fail", ["replace", "fsync", "write"])
def test_crash_mid_save_keeps_old_file(tmp_path, monkeypatch, fail):
    path = tmp_path / "ckpt.fnx"
    old = {"w": np.arange(4.0)}
    ser.save(path, old)
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError("simulated crash")

    if fail == "replace":
        monkeypatch.setattr(os, "replace", boom)
    elif fail == "fsync":
        monkeypatch.setattr(os, "fsync", boom)
    else:
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, b):
                self.f.write(b[: len(b) // 2])
                raise OSError("simulated crash")

        monkeypatch.setattr(os, "fdopen", lambda *a, **k: HalfWriter(real_fdopen(*a, **k)))
    with pytest.raises(OSError, match="simulated crash"):
        ser.save(path, {"w": np.arange(100.0)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.fnx"]
    np.testing.assert_array_equal(ser.load(path)["w"], old["w"])


_KILLED_SAVER = """
import sys, time
import numpy as np
from fnx.serialization import _checkpoint

def parts():
    yield b"x" * (1 << 20)   # a first MiB reaches the temporary, then the writer stalls
    print("writing", flush=True)
    time.sleep(60)
    yield b""

_checkpoint.atomic_write(sys.argv[1], parts())
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL and pid liveness are POSIX's")
def test_killed_saves_leave_temporaries_the_next_save_removes(tmp_path):
    import signal
    import subprocess
    import sys
    path = tmp_path / "ckpt.fnx"
    ser.save(path, {"w": np.arange(4.0)})
    seen = set()
    for _ in range(3):  # saves killed mid-write: each leaves one full-size temporary,
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_SAVER, str(path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        stale = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        # ... and the next save removed the one before
        assert len(stale) == 1 and os.path.getsize(tmp_path / stale[0]) == 1 << 20
        assert stale[0] not in seen
        seen.add(stale[0])
    # the old file is intact, and load ignores the temporaries beside it
    np.testing.assert_array_equal(ser.load(path)["w"], np.arange(4.0))
    # a temporary of a live writer (this process, or another one still running) stays
    live = tmp_path / f".ckpt.fnx.{_ckpt._HOST}-{os.getpid()}.0123456789ab.tmp"
    live.write_bytes(b"in progress")
    other = tmp_path / ".ckpt.fnx.bak.0123456789ab.tmp"  # another target's
    other.write_bytes(b"x")
    ser.save(path, {"w": np.arange(5.0)})
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt.fnx", live.name, other.name])
    np.testing.assert_array_equal(ser.load(path)["w"], np.arange(5.0))


def test_stale_temporaries_of_other_hosts_go_by_age(tmp_path):
    path = tmp_path / "m.fnx"
    old = tmp_path / ".m.fnx.deadbeef-12.0123456789ab.tmp"   # another host's writer
    legacy = tmp_path / ".m.fnx.0123456789ab.tmp"            # the earlier naming
    fresh = tmp_path / ".m.fnx.deadbeef-13.ba9876543210.tmp"
    for f in (old, legacy, fresh):
        f.write_bytes(b"partial")
    t = os.stat(old).st_mtime - _ckpt.STALE_TMP_SECONDS - 5
    os.utime(old, (t, t))
    os.utime(legacy, (t, t))
    assert sorted(_ckpt.remove_stale_temporaries(path)) == sorted([old.name, legacy.name])
    assert sorted(os.listdir(tmp_path)) == [fresh.name]


def test_save_replaces_and_keeps_mode(tmp_path):
    path = tmp_path / "m.fnx"
    ser.save(path, {"a": 1})
    os.chmod(path, 0o640)
    ser.save(path, {"a": 2})
    assert ser.load(path) == {"a": 2}
    if os.name == "posix":
        assert (os.stat(path).st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["m.fnx"]


# --- named states -------------------------------------------------------------------

class Block:
    """A stand-in for fnx.nn.Module: a pytree whose children are named attributes."""

    def __init__(self, **children):
        self.__dict__.update(children)

    def __repr__(self):
        return f"Block({self.__dict__})"


tree_util.register_pytree_with_keys(
    Block,
    lambda b: ([(tree_util.GetAttrKey(k), v) for k, v in sorted(vars(b).items())],
               tuple(sorted(vars(b)))),
    lambda names, children: Block(**dict(zip(names, children))))


def make_model(hidden=3, dtype="float32"):
    return Block(
        blk1=Block(conv1=Block(weight=fnp.ones((hidden, 2), dtype=dtype),
                               bias=fnp.zeros(hidden, dtype=dtype))),
        head=[Block(weight=fnp.full((2, hidden), 0.5, dtype=dtype), bias=None)],
        scale=fnp.asarray(2.0, dtype=dtype))


def test_save_states_flat_dotted_names(tmp_path):
    path = tmp_path / "model.fnx"
    model = make_model()
    ser.save_states(path, model, aux_states={"epoch": 3})
    payload = path.read_bytes()[ser.HEADER_SIZE:]
    raw = msgpack.unpackb(payload)
    assert sorted(raw["params"]) == ["blk1.conv1.bias", "blk1.conv1.weight",
                                     "head.0.weight", "scale"]
    blank = tree_util.tree_map(lambda x: fnp.zeros_like(x), model)
    loaded, aux = ser.load_states(path, blank)
    assert_same(loaded, model)
    assert aux == {"epoch": 3}
    assert type(loaded.blk1.conv1.weight) is fnx.Array and loaded.head[0].bias is None


def test_strict_mismatches_all_reported(tmp_path):
    path = tmp_path / "model.fnx"
    ser.save_states(path, make_model())
    other = make_model(hidden=4)                                  # shapes differ
    other.blk1.conv1.bias = fnp.zeros(3, dtype="float16")         # dtype differs
    other.extra = fnp.zeros(2)                                    # missing in file
    del other.scale                                               # unexpected in file
    with pytest.raises(CheckpointError) as info:
        ser.load_states(path, other)
    msg = str(info.value)
    assert "model.fnx" in msg
    assert "missing" in msg and "extra" in msg
    assert "unexpected" in msg and "scale" in msg
    assert "blk1.conv1.weight: file has float32[3, 2], module has float32[4, 2]" in msg
    assert "blk1.conv1.bias: file has float32[3], module has float16[3]" in msg
    assert "head.0.weight" in msg


def test_non_strict_loads_matching_entries(tmp_path):
    path = tmp_path / "model.fnx"
    saved = make_model()
    saved.blk1.conv1.weight = fnp.full((3, 2), 7.0, dtype="float32")
    ser.save_states(path, saved, aux_states=(1, 2))
    target = make_model(hidden=3)
    target.blk1.conv1.bias = fnp.full(3, 9.0, dtype="float16")    # dtype mismatch
    target.new = fnp.ones(1)
    with pytest.warns(ser.CheckpointWarning, match="blk1.conv1.bias") as rec:
        loaded, aux = ser.load_states(path, target, strict=False)
    assert "new" in str(rec[0].message)
    assert float(loaded.blk1.conv1.weight[0, 0]) == 7.0           # loaded
    assert loaded.blk1.conv1.bias.dtype == np.float16             # kept, not cast
    assert float(loaded.blk1.conv1.bias[0]) == 9.0
    assert loaded.new is target.new and aux == (1, 2)


@pytest.mark.x64   # with x64 off a float64 entry narrows into a float32 fnx leaf (below)
def test_dtype_exact_no_casts(tmp_path):
    path = tmp_path / "model.fnx"
    ser.save_states(path, {"w": np.ones(2, np.float64)})
    with pytest.raises(CheckpointError, match="w: file has float64"):
        ser.load_states(path, {"w": fnp.ones(2, dtype="float32")})
    loaded, _ = ser.load_states(path, {"w": np.zeros(2, np.float64)})
    assert type(loaded["w"]) is fnx.Array and loaded["w"].dtype == np.float64


def test_64_bit_entries_narrow_into_fnx_leaves_without_x64(tmp_path):
    """With jax_enable_x64 off, fnx (as JAX) makes 32-bit leaves of 64-bit values, so a
    float64/int64 checkpoint loads into them, narrowed with the once-per-process warning;
    NumPy leaves, other dtypes and x64 on stay exact, and errors say which way to go."""
    path = tmp_path / "model.fnx"
    w64, n64 = np.linspace(0, 1, 6).reshape(2, 3), np.arange(4, dtype=np.int64)
    with fnx.enable_x64(True):
        ser.save_states(path, {"w": fnp.asarray(w64), "n": fnp.asarray(n64)})
        loaded, _ = ser.load_states(path, {"w": fnp.zeros((2, 3)), "n": fnp.zeros(4, int)})
        assert loaded["w"].dtype == np.float64 and loaded["n"].dtype == np.int64
        np.testing.assert_array_equal(loaded["w"], w64)         # float64 round-trips exactly
        with pytest.raises(CheckpointError, match=r"file has float32\[3\], target has "
                           r"float64\[3\] \(saved with jax_enable_x64 off"):
            ser.from_bytes({"v": fnp.zeros(3)}, ser.to_bytes({"v": np.zeros(3, np.float32)}))
    fnx.core.dtypes.reset_narrowing_warning()
    with pytest.warns(UserWarning, match="loading a checkpoint.*float64 narrowed to float32"):
        loaded, _ = ser.load_states(path, {"w": fnp.zeros((2, 3)), "n": fnp.zeros(4, int)})
    assert loaded["w"].dtype == np.float32 and loaded["n"].dtype == np.int32
    np.testing.assert_array_equal(loaded["w"], w64.astype(np.float32))
    np.testing.assert_array_equal(loaded["n"], n64)
    sds = ser.from_bytes({"w": fnx.ShapeDtypeStruct((2, 3), np.float32)},
                         ser.to_bytes({"w": w64}))
    assert type(sds["w"]) is fnx.Array and sds["w"].dtype == np.float32
    with pytest.raises(CheckpointError, match=r"w: file has float64\[2, 3\], target has "
                       r"float32\[2, 3\] \(with jax_enable_x64 off"):
        ser.from_bytes({"w": np.zeros((2, 3), np.float32)}, ser.to_bytes({"w": w64}))
    with pytest.raises(CheckpointError, match=r"file has float64\[2, 3\], target has "
                       r"float16\[2, 3\]"):
        ser.from_bytes({"w": fnp.zeros((2, 3), np.float16)}, ser.to_bytes({"w": w64}))
    with pytest.raises(CheckpointError, match=r"file has float64\[6\], target has "
                       r"float32\[2, 3\]"):
        ser.from_bytes({"w": fnp.zeros((2, 3))}, ser.to_bytes({"w": w64.ravel()}))


OptState = collections.namedtuple("OptState", "count mu nu")


def test_aux_states_round_trip(tmp_path):
    path = tmp_path / "ckpt.fnx"
    params = {"w": fnp.ones((2, 2)), "b": fnp.zeros(2)}
    opt = ({"count": np.int32(5), "mu": {"w": np.full((2, 2), 0.1), "b": np.zeros(2)},
            "nu": {"w": np.full((2, 2), 0.01), "b": np.zeros(2)}}, {}, [None, 1e-3])
    aux = {"epoch": 7, "lr": 3e-4, "opt": opt, "name": "adam", "rng": np.uint32([1, 2])}
    ser.save_states(path, params, aux)
    loaded, aux2 = ser.load_states(path, params)
    assert_same(aux2, aux)
    # namedtuples come back as dicts without a target, exactly with one
    aux_nt = {"opt": OptState(np.int32(1), {"w": np.ones(2)}, {"w": np.ones(2)})}
    ser.save_states(path, params, aux_nt)
    _, plain = ser.load_states(path, params)
    assert set(plain["opt"]) == {"count", "mu", "nu"}
    _, exact = ser.load_states(path, params, aux_target=aux_nt)
    assert_same(exact, aux_nt)


def test_load_states_on_plain_save_file(tmp_path):
    path = tmp_path / "p.fnx"
    ser.save(path, {"w": np.ones(2)})
    with pytest.raises(CheckpointError, match="not a save_states checkpoint"):
        ser.load_states(path, {"w": np.ones(2)})


def test_from_bytes_structure_mismatch():
    data = ser.to_bytes({"a": np.ones(2, np.float32), "b": [1, 2]})
    with pytest.raises(CheckpointError) as info:
        ser.from_bytes({"a": np.ones(3, np.float32), "b": [1], "c": 0}, data)
    msg = str(info.value)
    assert "c" in msg and "b.1" in msg and "a: file has float32[2]" in msg


def test_colliding_dotted_names_refused(tmp_path):
    with pytest.raises(ValueError, match="a.b"):
        ser.save_states(tmp_path / "c.fnx", {"a.b": np.ones(1), "a": {"b": np.ones(1)}})
    assert not os.listdir(tmp_path)


def test_no_pickle_in_package():
    import pathlib
    src = pathlib.Path(ser.__file__).parent
    for f in src.glob("*.py"):
        text = f.read_text()
        assert "import pickle" not in text and "allow_pickle=True" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ser.msgpack_restore(ser.to_bytes({"a": 1}))
