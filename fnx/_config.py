"""``fnx.config``: JAX's configuration flags, with JAX's names and meanings.

Ported code sets flags the way it does under JAX::

    fnx.config.update("jax_enable_x64", True)      # or JAX_ENABLE_X64=1 in the environment
    fnx.config.jax_enable_x64                       # reads the current value
    with fnx.disable_jit(): ...                     # a flag as a context manager

Every flag fnx knows is listed in ``FLAGS`` with what fnx does with it. A flag
fnx implements changes behaviour as in JAX; a flag that cannot change a result
here (log and cache settings, the traceback filter) is accepted and recorded;
a value fnx cannot honour (the old non-partitionable threefry)
raises ``ValueError`` saying so. An unknown flag raises ``AttributeError``, so a
misspelt flag is never silently ignored.

Flags are read at their point of use (``config.values[name]`` is a plain dict
lookup, cheap enough for the hot paths). Components that cache something that
depends on a flag register ``on_change(name, fn)``; ``trace_context()`` is the
tuple of the values that change what a traced function means, and is part of
``jit``'s cache key, as in JAX.

Context managers (``fnx.disable_jit()``, ``fnx.debug_nans(True)``, ...) set a
flag for the ``with`` block and restore the previous value afterwards. Unlike
JAX's, they are process-wide rather than per thread.
"""
from __future__ import annotations

import contextlib
import os


def _bool(name, value):
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("1", "true", "t", "yes", "y", "on"):
            return True
        if low in ("0", "false", "f", "no", "n", "off", ""):
            return False
        raise ValueError(f"fnx.config: {name} takes a boolean, got {value!r}")
    if value is None or isinstance(value, (bool, int)):
        return bool(value)
    raise ValueError(f"fnx.config: {name} takes a boolean, got {value!r}")


def _choice(*allowed, refused=()):
    def check(name, value):
        if value in refused:
            raise ValueError(f"fnx.config: {name}={value!r} is not supported by fnx "
                             f"({refused[value]}); use one of {list(allowed)}")
        if value not in allowed:
            raise ValueError(f"fnx.config: {name} takes one of {list(allowed)}, got {value!r}")
        return value
    return check


def _anything(name, value):
    return value


def _platform(name, value):
    if value is None:
        return value
    for part in str(value).split(","):
        if part.strip().lower() not in ("cpu", "gpu", "cuda", ""):
            raise ValueError(f"fnx.config: {name}={value!r}: fnx's platforms are 'cpu' and "
                             "'gpu' (also called 'cuda')")
    return value


def _device(name, value):
    """None, a platform name ("cpu", "gpu", "cuda") or a device (``fnx.devices()``)."""
    if value is None or (isinstance(value, str) and value.lower() in ("cpu", "gpu", "cuda")):
        return value
    from .core.devices import Device
    if isinstance(value, Device):
        return value
    raise ValueError(f"fnx.config: {name} takes a device (one of fnx.devices()), a platform "
                     f"name ('cpu', 'gpu') or None, got {value!r}")


def _precision(name, value):
    allowed = (None, "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
               "bfloat16_3x", "fastest", "ANY_F8_ANY_F8_F32", "F32_F32_F32", "BF16_BF16_F32")
    if value not in allowed:
        raise ValueError(f"fnx.config: {name} takes one of {list(allowed)}, got {value!r}")
    return value


def _cpu_devices(name, value):
    if int(value) not in (-1, 1):
        raise ValueError(f"fnx.config: {name}={value!r}: fnx has one CPU device "
                         "(fnx.devices()); use -1 or 1")
    return int(value)


def _true_only(reason):
    def check(name, value):
        value = _bool(name, value)
        if not value:
            raise ValueError(f"fnx.config: {name}=False is not supported by fnx ({reason})")
        return value
    return check


# name: (default, validator, what fnx does with it)
FLAGS = {
    "jax_enable_x64": (False, _bool, "64-bit defaults and inputs (else narrowed to 32 bits)"),
    "jax_debug_nans": (False, _bool, "raise FloatingPointError at the primitive making a NaN"),
    "jax_debug_infs": (False, _bool, "raise FloatingPointError at the primitive making an inf"),
    "jax_disable_jit": (False, _bool, "jit runs the function eagerly"),
    "jax_numpy_rank_promotion": ("allow", _choice("allow", "warn", "raise"),
                                 "implicit rank promotion in fnx.numpy broadcasting"),
    "jax_numpy_dtype_promotion": ("standard", _choice("standard", "strict"),
                                  "'strict' refuses implicit promotion between dtypes"),
    "jax_default_matmul_precision": (None, _precision,
                                     "recorded; NumPy's CPU matmuls run at full precision"),
    "jax_platform_name": (None, _platform, "recorded; the default device is the CPU unless "
                                           "jax_default_device names another"),
    "jax_platforms": (None, _platform, "recorded; see jax_platform_name"),
    "jax_default_prng_impl": ("threefry2x32", _choice("threefry2x32", "rbg", "unsafe_rbg"),
                              "the generator of fnx.random.PRNGKey's keys"),
    "jax_threefry_partitionable": (True, _true_only("fnx derives keys the partitionable way, "
                                                    "JAX's default since 0.5"),
                                   "always on"),
    "jax_enable_checks": (False, _bool, "check the IR after every pass"),
    "jax_log_compiles": (False, _bool, "log each jit compilation"),
    "jax_explain_cache_misses": (False, _bool, "log why a jit cache lookup missed"),
    "jax_check_tracer_leaks": (False, _bool, "recorded; fnx always detects leaked tracers"),
    "jax_traceback_filtering": ("auto", _choice("auto", "off", "tracebackhide",
                                                "remove_frames", "quiet_remove_frames"),
                                "recorded; fnx does not filter tracebacks"),
    "jax_compilation_cache_dir": (None, _anything, "recorded; compiles are in memory"),
    "jax_persistent_cache_min_compile_time_secs": (1.0, _anything, "recorded"),
    "jax_persistent_cache_min_entry_size_bytes": (0, _anything, "recorded"),
    "jax_transfer_guard": (None, _anything, "recorded; one device, no transfers"),
    "jax_default_device": (None, _device, "where computations on uncommitted values run"),
    "jax_dynamic_shapes": (False, _choice(False), "shapes are static"),
    "jax_spmd_mode": ("allow_all", _anything, "recorded"),
    "jax_use_shardy_partitioner": (False, _anything, "recorded; no partitioner"),
    "jax_cpu_enable_async_dispatch": (True, _anything, "recorded; dispatch is synchronous"),
    "jax_pprint_use_color": (True, _anything, "recorded"),
    "jax_num_cpu_devices": (-1, _cpu_devices, "one CPU device (-1 or 1)"),
    "jax_cpu_collectives_implementation": (
        "none", _choice("none", "gloo", "mpi", "megascale"),
        "recorded; processes exchange through MPI (fnx.distributed) whatever it says"),
    "jax_remat3": (False, _bool, "recorded; checkpoint's results do not depend on it"),
    "jax_optimization_level": ("UNKNOWN", _anything, "recorded; no XLA"),
    "jax_memory_fitting_level": ("O2", _anything, "recorded; no XLA"),
    "jax_use_simplified_jaxpr_constants": (False, _bool, "recorded"),
    "jax_include_full_tracebacks_in_locations": (True, _bool, "recorded"),
    "jax_captured_constants_warn_bytes": (2_000_000_000, _anything, "recorded"),
    "jax_raise_persistent_cache_errors": (False, _bool, "recorded; no persistent cache"),
    "jax_softmax_custom_jvp": (False, _bool, "recorded; fnx.nn.softmax's derivative is exact"),
    "jax_legacy_prng_key": ("allow", _choice("allow", "warn", "error"),
                            "recorded; fnx keys are uint32[2] arrays"),
    "jax_enable_custom_prng": (False, _choice(False), "fnx.random is threefry-2x32"),
    "jax_debug_key_reuse": (False, _choice(False), "fnx does not track key reuse"),
    **{f"jax_transfer_guard_{way}": (None, _anything, "recorded; transfers are explicit "
                                     "(device_put, default_device)")
       for way in ("host_to_device", "device_to_device", "device_to_host")},
    "jax_random_seed_offset": (0, _choice(0), "seeds are used as given"),
}

# Flags whose value changes what a traced function computes: part of jit's cache key.
TRACE_FLAGS = ("jax_enable_x64", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion",
               "jax_default_matmul_precision", "jax_debug_nans", "jax_debug_infs",
               "jax_default_prng_impl")


class Config:
    """The flag values; ``update`` sets one, attribute access reads one."""

    def __init__(self):
        object.__setattr__(self, "values", {n: d for n, (d, _, _) in FLAGS.items()})
        object.__setattr__(self, "_listeners", {})
        for name, (_, check, _) in FLAGS.items():
            for prefix in ("FNX_", ""):
                env = os.environ.get(prefix + name.upper())
                if env is not None:
                    self.values[name] = check(name, env)
                    break

    def update(self, name, value):
        """Set flag ``name`` (JAX's name, e.g. ``"jax_enable_x64"``) to ``value``."""
        if name not in FLAGS:
            raise AttributeError(f"fnx.config: unknown flag {name!r}; fnx knows "
                                 f"{', '.join(sorted(FLAGS))}")
        value = FLAGS[name][1](name, value)
        old = self.values[name]
        self.values[name] = value
        if old != value:
            try:
                for fn in self._listeners.get(name, ()):
                    fn(value)
            except BaseException:  # a listener refused the value: keep the old one
                self.values[name] = old
                for fn in self._listeners.get(name, ()):
                    fn(old)
                raise

    def read(self, name):
        if name not in FLAGS:
            raise AttributeError(f"fnx.config: unknown flag {name!r}")
        return self.values[name]

    def on_change(self, name, fn):
        """Call ``fn(new_value)`` whenever flag ``name`` changes value."""
        self._listeners.setdefault(name, []).append(fn)

    def trace_context(self):
        v = self.values
        return tuple(v[n] for n in TRACE_FLAGS)

    @property
    def x64_enabled(self):
        return self.values["jax_enable_x64"]

    def config_with_absl(self):
        """JAX reads its flags from absl here; fnx has no absl flags, so nothing to do."""

    def parse_flags_with_absl(self):
        """JAX parses ``--jax_*`` command-line flags here; fnx reads them from ``sys.argv``."""
        import sys
        for arg in sys.argv[1:]:
            if arg.startswith("--jax_") and "=" in arg:
                name, value = arg[2:].split("=", 1)
                if name in FLAGS:
                    self.update(name, value)

    @contextlib.contextmanager
    def _override(self, name, value):
        old = self.values[name]
        self.update(name, value)
        try:
            yield
        finally:
            self.update(name, old)

    def __getattr__(self, name):
        values = object.__getattribute__(self, "values")
        if name in values:
            return values[name]
        raise AttributeError(f"fnx.config has no flag {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"set flags with fnx.config.update({name!r}, value)")

    def __repr__(self):
        return "fnx.config(" + ", ".join(f"{n}={v!r}" for n, v in self.values.items()) + ")"


config = Config()


def disable_jit(disable: bool = True):
    """``with fnx.disable_jit():`` runs jitted functions eagerly inside the block."""
    return config._override("jax_disable_jit", disable)


def debug_nans(value: bool = True):
    return config._override("jax_debug_nans", value)


def debug_infs(value: bool = True):
    return config._override("jax_debug_infs", value)


def enable_x64(value: bool = True):
    return config._override("jax_enable_x64", value)


def numpy_rank_promotion(value):
    return config._override("jax_numpy_rank_promotion", value)


def numpy_dtype_promotion(value):
    return config._override("jax_numpy_dtype_promotion", value)


def default_matmul_precision(value):
    return config._override("jax_default_matmul_precision", value)


def enable_checks(value: bool = True):
    return config._override("jax_enable_checks", value)


def log_compiles(value: bool = True):
    return config._override("jax_log_compiles", value)


# JAX's context managers of flags that fnx records (see FLAGS for what each does here)
def legacy_prng_key(value):
    return config._override("jax_legacy_prng_key", value)


def softmax_custom_jvp(value: bool = True):
    return config._override("jax_softmax_custom_jvp", value)


def enable_custom_prng(value: bool = True):
    return config._override("jax_enable_custom_prng", value)


def debug_key_reuse(value: bool = True):
    return config._override("jax_debug_key_reuse", value)


@contextlib.contextmanager
def transfer_guard(value):
    """``with fnx.transfer_guard(level):`` sets the three directions' guards at once."""
    with transfer_guard_host_to_device(value), transfer_guard_device_to_device(value), \
            transfer_guard_device_to_host(value):
        yield


def transfer_guard_host_to_device(value):
    return config._override("jax_transfer_guard_host_to_device", value)


def transfer_guard_device_to_device(value):
    return config._override("jax_transfer_guard_device_to_device", value)


def transfer_guard_device_to_host(value):
    return config._override("jax_transfer_guard_device_to_host", value)
