"""Memory that comes back: jitted closures are freed with their function, a function's
signature cache is a bounded LRU, the buffers compiled functions keep between calls
(``fnx.backends.buffers``) are released when idle, over budget, when their function is
collected and by ``fnx.clear_caches()``. Live bytes are measured with tracemalloc
(NumPy reports its allocations to it) after a ``gc.collect()``."""
import gc
import hashlib
import tracemalloc
import weakref

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.backends import buffers
from fnx.transforms import jit as jit_module


@pytest.fixture(autouse=True)
def _numpy_lowering(numpy_lowering):
    """the NumPy lowering's buffer rings (native loops allocate their results afresh)"""


def _live():
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.fixture
def traced():
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    yield
    if started:
        tracemalloc.stop()


# --- jitted closures ---------------------------------------------------------------------

def test_two_thousand_jitted_closures_do_not_accumulate():
    """Each ``jit(lambda ...)`` is a new function with its own trace; once the lambda is
    gone, so are its trace, compiled code and cache entries (the compiled-code cache is
    weakly keyed by the IR and its values must not refer back to it). Objects are
    counted over all 2000 closures, bytes (tracemalloc, which slows tracing tenfold)
    over the last 950."""
    x = fnp.ones((4,))

    def make(n, offset):
        for i in range(n):
            fnx.jit(lambda x: x + (i + offset))(x)

    make(100, 0)  # first-use caches
    gc.collect()
    objects, compiled = len(gc.get_objects()), len(fnx.backends.get_backend("numpy").executables)
    make(900, 100)
    gc.collect()
    grown = len(gc.get_objects()) - objects
    assert grown < 2000, f"{grown} objects kept by 900 dead jitted closures"  # ~17000 before
    assert len(fnx.backends.get_backend("numpy").executables) <= compiled + 5
    tracemalloc.start()
    try:
        make(50, 1000)
        before = _small_blocks()
        make(950, 1050)
        grown = _small_blocks() - before
    finally:
        tracemalloc.stop()
    # about 4 KB per closure before the fix (4 MB here); nothing per closure after it
    assert grown < 128 * 1024, f"{grown} bytes kept by 950 dead jitted closures"
    assert len(fnx.backends.get_backend("numpy").executables) <= compiled + 5


def _small_blocks():
    """Live traced bytes in blocks under 64 KiB: what dead closures would leak (objects,
    code, small arrays), without the interpreter's own tables (its interned-string dict
    is rebuilt, hundreds of KB at once, after a few thousand new function names)."""
    gc.collect()
    return sum(t.size for t in tracemalloc.take_snapshot().traces if t.size < 1 << 16)


def test_compiled_code_holds_no_reference_to_its_ir():
    ir_holder = fnx.jit(lambda x: x * 3.0 + 1.0)
    lowered = ir_holder.lower(fnp.ones(3))
    compiled = lowered.compile().compiled
    ir_ref = weakref.ref(lowered.ir)
    assert not hasattr(compiled, "ir")
    fn = compiled.fn
    assert fn.__name__ not in fn.__globals__  # no function <-> globals cycle
    del lowered, ir_holder
    gc.collect()
    assert ir_ref() is None  # neither compiled code nor its globals keep the IR alive
    assert np.array_equal(np.asarray(fn(np.ones(3, np.float32))[0]), np.full(3, 4.0, np.float32))


# --- the per-function signature cache ------------------------------------------------------

@pytest.fixture
def small_cache(monkeypatch):
    monkeypatch.setattr(jit_module, "MAX_SIGNATURES", 3)


def test_signature_cache_evicts_the_least_recently_used(small_cache):
    jf = fnx.jit(lambda x: x * 2.0)
    for n in (1, 2, 3):
        jf(fnp.ones(n))
    assert jf.trace_count == 3 and jf._cache_size() == 3
    jf(fnp.ones(1))                 # a hit (fast path): 1 is now the most recently used
    jf(fnp.ones(4))                 # full: evicts 2, the least recently used
    assert jf.trace_count == 4 and jf._cache_size() == 3
    jf(fnp.ones(1))
    jf(fnp.ones(3))
    assert jf.trace_count == 4      # 1 and 3 are still cached
    out = jf(fnp.ones(2))           # 2 was evicted: traced again, and still right
    assert jf.trace_count == 5 and jf._cache_size() == 3
    np.testing.assert_array_equal(out, np.full(2, 2.0, np.float32))
    assert len(jf._fast) <= 3       # the fast table forgets evicted signatures too


def test_signature_cache_evicts_in_call_order_through_every_call_path(small_cache):
    """Pytree arguments (the other fast table) and keyword arguments (the full path)
    are bounded alike; the evicted entry's compiled code is freed."""
    jf = fnx.jit(lambda p, scale=1.0: p["w"] * scale)
    first = jf.lower({"w": fnp.ones(1)}, scale=2.0).compile().compiled
    gone = weakref.ref(first)
    del first
    for n in range(1, 7):
        jf({"w": fnp.ones(n)})
        jf({"w": fnp.ones(n)}, scale=2.0)
    assert jf._cache_size() == 3 and len(jf._c.fast_trees) <= 3
    gc.collect()
    assert gone() is None
    count = jf.trace_count
    jf({"w": fnp.ones(1)}, scale=2.0)  # long evicted: traced again
    assert jf.trace_count == count + 1


def test_alternating_trace_contexts_keep_the_cache_bookkeeping_constant():
    jf = fnx.jit(lambda x: x + 1.0)
    x = fnp.ones(3)
    for _ in range(20):
        with fnx.enable_x64(True):
            jf(x)
        jf(x)
    assert jf.trace_count == 2
    assert [len(e.fast_keys) for e in jf._cache.values()] == [1, 1]


def test_signature_cache_default_bound_is_jax_scale():
    assert 1024 <= jit_module.MAX_SIGNATURES <= 8192


# --- buffers kept between calls ------------------------------------------------------------

def _loss(p, x):
    return ((fnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]) ** 2).mean()


def _adam_like_step(p, m, v, x):
    g = fnx.grad(_loss)(p, x)
    tm = fnx.tree_util.tree_map
    m = tm(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = tm(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    p = tm(lambda p, m, v: p - 1e-3 * m / (fnp.sqrt(v) + 1e-8), p, m, v)
    return p, m, v


def _state(seed=0):
    rng = np.random.default_rng(seed)
    p = {"w1": fnp.asarray(rng.standard_normal((384, 384), dtype=np.float32)),
         "b1": fnp.zeros(384),
         "w2": fnp.asarray(rng.standard_normal((384, 256), dtype=np.float32))}
    zeros = fnx.tree_util.tree_map(fnp.zeros_like, p)
    return p, zeros, dict(zeros)


def _nbytes(tree):
    return sum(np.asarray(a).nbytes for a in fnx.tree_util.tree_leaves(tree))


def _digest(tree):
    return [hashlib.sha256(np.asarray(a).tobytes()).hexdigest()
            for a in fnx.tree_util.tree_leaves(tree)]


def _train(step, state, batch_sizes=(32, 16, 8, 4), steps=3):
    rng = np.random.default_rng(1)
    p, m, v = state
    for bs in batch_sizes:
        x = fnp.asarray(rng.standard_normal((bs, 384), dtype=np.float32))
        for _ in range(steps):
            p, m, v = step(p, m, v, x)
    return p, m, v


def test_training_step_memory_returns_to_baseline_after_clear_caches(traced):
    step = fnx.jit(lambda *a: _adam_like_step(*a))  # traces of its own
    _train(step, _state(), batch_sizes=(2,), steps=1)  # first-use caches, then drop it all
    fnx.clear_caches()
    base = _live()
    state = _state()
    size = _nbytes(state)                      # 2.3 MB of parameters and moments
    # an ahead-of-time compiled step the caller keeps: clear_caches releases its buffers
    # too (the jit cache alone would leave them to it)
    aot = step.lower(*state, fnp.ones((32, 384))).compile()
    state = _train(step, state)
    aot(*state, fnp.ones((32, 384)))
    held = _live() - base
    assert held > 4 * size                     # the rings: about two copies per signature
    reference = _digest(state)
    del state
    fnx.clear_caches()
    assert buffers.held_bytes() == 0
    left = _live() - base
    assert left < 0.05 * size, f"{left / size:.2f}x the state still referenced"
    # everything still works, from scratch
    again = _train(step, _state())
    assert _digest(again) == reference
    del aot


def test_rings_of_a_signature_not_used_for_a_while_are_released(traced):
    """After the loop moves on from batch 32 to batch 4, the batch-32 signature's rings
    (two copies of the state) go once ``IDLE_CALLS`` other pooled calls have run, without
    ``clear_caches``; the signature stays cached (no retrace)."""
    step = fnx.jit(lambda *a: _adam_like_step(*a))  # traces of its own
    state = _state()
    size = _nbytes(state)
    state = _train(step, state, batch_sizes=(32,))
    pool32 = step.lower(*state, fnp.ones((32, 384))).compile().compiled.pool
    assert pool32.nbytes > size
    base = _live()
    state = _train(step, state, batch_sizes=(4,), steps=2)
    tiny = fnx.jit(lambda x: x + 1.0)   # any pooled function counts: 64 KB output
    y = fnp.ones(16384)
    for _ in range(buffers.IDLE_CALLS + buffers.IDLE_CALLS // 4 + 2):
        tiny(y)
    assert pool32.nbytes == 0 and pool32.arena is None
    assert _live() - base < -0.8 * size     # at least the batch-32 rings came back
    traces = step.trace_count
    state = _train(step, state, batch_sizes=(32,), steps=1)
    assert step.trace_count == traces       # still cached, buffers allocated afresh
    assert pool32.nbytes > 0


def test_buffers_over_the_budget_release_the_least_recently_used(monkeypatch):
    monkeypatch.setattr(buffers, "MAX_HELD_BYTES", 600_000)
    fns = [fnx.jit(lambda x, k=k: fnp.sin(x) + float(k)) for k in range(4)]
    x = fnp.ones(65536)                 # 256 KB outputs: two rings fit the budget
    pools = [f.lower(x).compile().compiled.pool for f in fns]
    for f in fns:
        f(x)
    assert [p.nbytes for p in pools] == [0, 0, 262144, 262144]
    assert buffers.held_bytes() <= 600_000
    np.testing.assert_array_equal(fns[0](x), np.sin(np.ones(65536, np.float32)))


def test_buffers_of_a_collected_function_are_released_and_forgotten():
    """A collected pool's buffers that the caller still holds are no longer counted as
    ring-held, so donating one that a view still references does not overwrite it."""
    f = fnx.jit(lambda x: x * 2.0)
    y = f(fnp.ones(8192))
    pool = weakref.ref(f.lower(fnp.ones(8192)).compile().compiled.pool)
    view = np.asarray(y)
    before = view.copy()
    del f
    gc.collect()
    assert pool() is None
    assert id(y._value) not in buffers.RING_HELD
    step = fnx.jit(lambda w: w + 1.0, donate_argnums=0)
    z = step(y)
    np.testing.assert_array_equal(view, before)
    np.testing.assert_array_equal(z, before + 1.0)


def test_a_released_pool_forgets_its_buffers_and_outputs_stay_valid():
    f = fnx.jit(lambda x: x * 2.0)
    y = f(fnp.ones(8192))
    pool = f.lower(fnp.ones(8192)).compile().compiled.pool
    assert pool.nbytes > 0 and id(y._value) in buffers.RING_HELD
    assert pool.release()
    assert pool.nbytes == 0 and id(y._value) not in buffers.RING_HELD
    np.testing.assert_array_equal(y, np.full(8192, 2.0, np.float32))
    z = f(fnp.ones(8192))
    assert z._value is not y._value
