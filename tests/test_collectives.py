"""Collectives over named axes (``fnx.lax.psum``, ``pmean``, ``pmax``, ``pmin``,
``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``, ``axis_index``) bound by
``vmap(..., axis_name=...)``: each against its definition written as a NumPy loop over the
members, with unbatched operands, nested and other named axes, under jit and inside
control flow; their derivatives against the derivative of the members' total (what a
data-parallel step differentiates) and finite differences; and the errors."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import ShapeError, UnboundAxisError

RNG = np.random.default_rng(0)
N = 4   # members


def members(shape):
    return RNG.standard_normal((N,) + shape).astype(np.float32)


def vm(f):
    return fnx.vmap(f, axis_name="i")


# --- each collective against its definition --------------------------------------------------

def test_reductions():
    x = members((3, 2))
    for name, ref in (("psum", x.sum(0)), ("pmax", x.max(0)), ("pmin", x.min(0)),
                      ("pmean", x.mean(0))):
        got = np.asarray(vm(lambda v: getattr(lax, name)(v, "i"))(x))
        np.testing.assert_allclose(got, np.broadcast_to(ref, x.shape), rtol=1e-6, atol=1e-6,
                                   err_msg=name)
    # an operand the same on every member (here a constant): psum is size times it
    np.testing.assert_array_equal(np.asarray(vm(lambda v: lax.psum(2.0, "i"))(x)),
                                  np.full(N, 2.0 * N))
    ints = np.arange(N * 3, dtype=np.int32).reshape(N, 3)
    got = vm(lambda v: lax.psum(v, "i"))(ints)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(ints.sum(0), ints.shape))
    # pytrees: each leaf reduced
    tree = vm(lambda a, b: lax.psum({"a": a, "b": (b,)}, "i"))(x, x[:, 0])
    np.testing.assert_allclose(np.asarray(tree["b"][0]), np.broadcast_to(x[:, 0].sum(0),
                                                                         (N, 2)), rtol=1e-6)


@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (-1, False), (0, True),
                                        (1, True)])
def test_all_gather(axis, tiled):
    x = members((3, 2))
    got = np.asarray(vm(lambda v: lax.all_gather(v, "i", axis=axis, tiled=tiled))(x))
    stacked = (np.concatenate(list(x), axis=axis) if tiled
               else np.stack(list(x), axis=axis))
    np.testing.assert_array_equal(got, np.broadcast_to(stacked, (N,) + stacked.shape))


@pytest.mark.parametrize("dim,tiled", [(0, False), (1, False), (0, True), (1, True)])
def test_psum_scatter(dim, tiled):
    shape = [3, 5]
    shape[dim] = N * (2 if tiled else 1)
    x = members(tuple(shape))
    got = np.asarray(vm(lambda v: lax.psum_scatter(v, "i", scatter_dimension=dim,
                                                   tiled=tiled))(x))
    total = x.sum(0)
    chunks = np.split(total, N, axis=dim)
    want = np.stack([c if tiled else np.squeeze(c, dim) for c in chunks])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ppermute_and_axis_index():
    x = members((2,))
    perm = [(0, 1), (1, 2), (2, 0)]          # member 3 receives nothing: zeros
    got = np.asarray(vm(lambda v: lax.ppermute(v, "i", perm))(x))
    want = np.zeros_like(x)
    for s, t in perm:
        want[t] = x[s]
    np.testing.assert_array_equal(got, want)
    idx = vm(lambda v: lax.axis_index("i"))(x)
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(idx), np.arange(N))
    assert vm(lambda v: v * 0 + lax.axis_size("i"))(x[:, 0]).tolist() == [N] * N


@pytest.mark.parametrize("split,concat,tiled", [(0, 0, False), (0, 1, False), (1, 0, False),
                                                (0, 1, True), (1, 1, True)])
def test_all_to_all(split, concat, tiled):
    shape = [3, 3]
    shape[split] = N * (2 if tiled else 1)
    x = members(tuple(shape))
    got = np.asarray(vm(lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled))(x))
    for j in range(N):        # member j: chunk j of every sender, in sender order
        parts = [np.split(x[i], N, axis=split)[j] for i in range(N)]
        if tiled:
            want = np.concatenate(parts, axis=concat)
        else:
            want = np.stack([np.squeeze(p, split) for p in parts], axis=concat)
        np.testing.assert_array_equal(got[j], want)


# --- binding: nesting, other axes, jit, control flow ----------------------------------------

def test_nested_and_other_named_axes():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    both = fnx.vmap(fnx.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"),
                    axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(both), np.full((2, 3), x.sum()), rtol=1e-6)
    outer = fnx.vmap(fnx.vmap(lambda v: lax.psum(v, "i"), axis_name="j"), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(outer), np.broadcast_to(x.sum(0), (2, 3)),
                               rtol=1e-6)
    gathered = fnx.vmap(fnx.vmap(lambda v: lax.all_gather(v, "i"), axis_name="j"),
                        axis_name="i")(x)
    assert gathered.shape == (2, 3, 2)
    np.testing.assert_array_equal(np.asarray(gathered)[1, 2], x[:, 2])
    # an unnamed vmap inside: its batch is an ordinary axis of the collective's operand
    inner = vm(fnx.vmap(lambda v: lax.psum(v, "i")))(members((3,)))
    assert inner.shape == (N, 3)


def test_jit_and_control_flow_keep_the_named_axis():
    x = members((3,))

    def f(v):
        return lax.psum(v, "i") * v

    want = np.asarray(vm(f)(x))
    np.testing.assert_allclose(np.asarray(fnx.jit(vm(f))(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vm(fnx.jit(f))(x)), want, rtol=1e-6)
    scanned = vm(lambda v: lax.scan(lambda c, e: (c + lax.psum(e, "i"), None), 0.0, v)[0])(x)
    np.testing.assert_allclose(np.asarray(scanned), np.full(N, x.sum()), rtol=1e-5)
    branch = vm(lambda v: lax.cond(v[0] > 0, lambda: lax.pmax(v, "i"), lambda: v))(x)
    for k in range(N):
        np.testing.assert_allclose(np.asarray(branch)[k], x.max(0) if x[k, 0] > 0 else x[k])


# --- derivatives -------------------------------------------------------------------------------

CASES = {
    "psum": lambda v: fnp.sum(lax.psum(v, "i") * v),
    "pmean": lambda v: fnp.sum(fnp.sin(lax.pmean(v, "i")) * v),
    "all_gather": lambda v: fnp.sum(lax.all_gather(v, "i") ** 2 * (lax.axis_index("i") + 1)),
    "all_gather_tiled": lambda v: fnp.sum(fnp.tanh(lax.all_gather(v, "i", tiled=True))),
    "psum_scatter": lambda v: fnp.sum(lax.psum_scatter(
        fnp.concatenate([v, v * 2]), "i", tiled=True) ** 2),
    "ppermute": lambda v: fnp.sum(lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]) * v),
    "all_to_all": lambda v: fnp.sum(lax.all_to_all(
        fnp.reshape(v * v, (N, 2)), "i", 0, 1) * fnp.arange(N * 2.0).reshape(2, N)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_member_gradient_is_the_gradient_of_the_members_total(name):
    """vmap(grad(f)) gives each member the derivative of every member's loss summed, as
    JAX's transposes (psum's is psum) make it; checked against grad of the total and
    against central differences of the total."""
    f = CASES[name]
    x = RNG.standard_normal((N, 8)).astype(np.float64)
    with fnx.enable_x64(True):
        per_member = np.asarray(vm(fnx.grad(f))(x))
        total = lambda xs: fnp.sum(vm(f)(xs))  # noqa: E731
        np.testing.assert_allclose(per_member, np.asarray(fnx.grad(total)(x)), rtol=1e-10,
                                   atol=1e-12)
        eps = 1e-6
        for idx in [(0, 0), (2, 5), (3, 7)]:
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps
            xm[idx] -= eps
            fd = (float(total(xp)) - float(total(xm))) / (2 * eps)
            np.testing.assert_allclose(per_member[idx], fd, rtol=1e-6, atol=1e-8)


def test_pmax_is_not_differentiable_as_in_jax():
    with pytest.raises(Exception, match="pmax"):
        vm(fnx.grad(lambda v: lax.pmax(v, "i")))(members(()))


# --- errors ------------------------------------------------------------------------------------

def test_unbound_and_bad_arguments_are_named():
    with pytest.raises(UnboundAxisError, match="unbound axis name 'k'"):
        lax.psum(1.0, "k")
    with pytest.raises(UnboundAxisError, match="'k'.*bound here are \\['i'\\]"):
        vm(lambda v: lax.psum(v, "k"))(members(()))
    with pytest.raises(NameError):                       # as JAX's
        lax.axis_index("nope")
    with pytest.raises(ValueError, match="repeats a source or a target"):
        vm(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]))(members(()))
    with pytest.raises(ValueError, match="outside the axis 'i' of size 4"):
        vm(lambda v: lax.ppermute(v, "i", [(0, 9)]))(members(()))
    with pytest.raises(ShapeError, match="must equal the axis size 4"):
        vm(lambda v: lax.psum_scatter(v, "i"))(members((3,)))
    with pytest.raises(NotImplementedError, match="several axis names"):
        fnx.vmap(vm(lambda v: lax.all_gather(v, ("i", "j"))), axis_name="j")(
            RNG.standard_normal((2, N)))
