"""Common mistakes raise an instance of the built-in exception JAX raises for them
(recorded from JAX 0.10.2), so ``except TypeError:`` in ported code still works, and
carry fnx's message saying what went wrong and what to do."""
import pytest

import fnx
import fnx.numpy as jnp
from fnx import lax
from fnx.errors import FnxError

x3, x4 = jnp.ones(3), jnp.ones(4)


@fnx.custom_vjp
def _cv(x):
    return x * 2.0


_cv.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g * 2.0,))


@fnx.custom_vjp
def _cv_bare(x):
    return x * 2.0


_cv_bare.defvjp(lambda x: (x * 2.0, None), lambda r, g: g * 2.0)


@fnx.custom_vjp
def _cv_two(x):
    return x * 2.0


_cv_two.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g * 2.0, g))


@fnx.custom_jvp
def _cj(x):
    return x * 2.0


_cj.defjvp(lambda p, t: (p[0] * 2.0, jnp.ones(2)))


# (what, the mistake, JAX's exception type, fnx's message, an FnxError?)
CASES = [
    ("jvp of a custom_vjp function", lambda: fnx.jvp(_cv, (1.0,), (1.0,)),
     TypeError, "cannot be differentiated in forward mode.*Use grad/vjp/jacrev", True),
    ("grad of a non-scalar output", lambda: fnx.grad(lambda x: x * 2)(x3),
     TypeError, r"must return a real scalar.*shape \(3,\).*Reduce it", True),
    ("grad of an integer input", lambda: fnx.grad(lambda x: x * 2)(3),
     TypeError, r"real- or complex-valued inputs.*int\d+.*astype\(float\)", True),
    ("grad of a bool input", lambda: fnx.grad(lambda x: 1.0)(True),
     TypeError, "real- or complex-valued inputs.*bool", True),
    ("grad of a complex output", lambda: fnx.grad(lambda z: z * z)(1j),
     TypeError, "real-valued outputs.*complex.*pass holomorphic=True", True),
    ("holomorphic grad of a real input",
     lambda: fnx.grad(lambda z: z * z, holomorphic=True)(1.0),
     TypeError, "holomorphic=True requires inputs with complex dtype", True),
    ("grad argnums out of range", lambda: fnx.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0),
     TypeError, "argnums 2 out of range for 2 positional arguments", True),
    ("grad of a tuple output", lambda: fnx.grad(lambda x: (x, x))(1.0),
     TypeError, "returned a tuple of 2 values.*has_aux=True", True),
    ("has_aux without a pair", lambda: fnx.grad(lambda x: x, has_aux=True)(1.0),
     TypeError, r"has_aux=True the function must return a pair \(output, aux\)", False),
    ("jvp tangent of another shape", lambda: fnx.jvp(jnp.sin, (x3,), (x4,)),
     ValueError, r"tangent 0 has shape \(4,\) but its primal has shape \(3,\)", False),
    ("jvp tangent of another dtype",
     lambda: fnx.jvp(jnp.sin, (x3,), (jnp.ones(3, dtype=jnp.int32),)),
     TypeError, "tangents must match their primals' dtypes", False),
    ("jvp primals not a tuple", lambda: fnx.jvp(jnp.sin, x3, x3),
     TypeError, "primals and tangents must be tuples", False),
    ("jvp structures differ", lambda: fnx.jvp(lambda a, b: a, (x3, x3), (x3,)),
     TypeError, "primals and tangents must have the same structure", True),
    ("linearize tangents structured differently", lambda: fnx.linearize(jnp.sin, x3)[1](x3, x3),
     TypeError, "tangents must be structured like the primals", True),
    ("vjp cotangent of another shape", lambda: fnx.vjp(jnp.sin, x3)[1](x4),
     ValueError, r"cotangent 0 has shape \(4,\), but output 0 has shape \(3,\)", False),
    ("vjp cotangent structured differently", lambda: fnx.vjp(jnp.sin, x3)[1]((x3, x3)),
     ValueError, "cotangent must be structured like the output", True),
    ("custom_vjp bwd returns a bare array", lambda: fnx.grad(_cv_bare)(1.0),
     TypeError, "_cv_bare: bwd must return a tuple with one cotangent per", True),
    ("custom_vjp bwd returns too many", lambda: fnx.grad(_cv_two)(1.0),
     TypeError, "_cv_two: bwd returned 2 cotangents, but the function has 1", True),
    ("custom_jvp tangent of another shape", lambda: fnx.jvp(_cj, (1.0,), (1.0,)),
     TypeError, r"_cj: output tangent 0 has shape \(2,\), but its primal has shape \(\)", True),
    ("vmap axis sizes differ", lambda: fnx.vmap(lambda a, b: a + b)(x3, x4),
     ValueError, "mapped axes have different sizes", False),
    ("vmap in_axes out of range", lambda: fnx.vmap(jnp.sin, in_axes=2)(x3),
     ValueError, r"in_axes 2 is out of range for an argument of shape \(3,\)", False),
    ("vmap in_axes structure", lambda: fnx.vmap(lambda a, b: a + b, in_axes=(0, 0, 0))(x3, x3),
     ValueError, "in_axes does not match the arguments' structure", False),
    ("Python if on a traced value", lambda: fnx.jit(lambda x: x if x > 0 else -x)(1.0),
     TypeError, r"bool\(\) needs a concrete value.*lax.cond", True),
    ("int() of a traced value", lambda: fnx.jit(lambda x: int(x))(1.0),
     TypeError, r"int\(\) needs a concrete value", True),
    ("traced shape", lambda: fnx.jit(lambda n: jnp.zeros(n))(2),
     TypeError, "must be known when tracing.*static_argnums", True),
    ("static index out of range", lambda: x3[5],
     IndexError, "index 5 is out of bounds for axis 0 with size 3.*mode='clip'", True),
    ("static update index out of range", lambda: x3.at[5].set(1.0),
     IndexError, "out of bounds.*mode='drop'", True),
    ("float index", lambda: x3[1.5],
     TypeError, r"indices must be integers.*a float \(1.5\)", True),
    ("float index array", lambda: x3[jnp.array([1.0])],
     TypeError, "indices must be integers.*float\\d+", True),
    ("too many indices", lambda: x3[0, 0], IndexError, "Too many indices", False),  # JAX's
    ("item assignment", lambda: x3.__setitem__(0, 1.0),
     TypeError, r"immutable.*x.at\[0\].set", False),
    ("unknown indexing mode", lambda: x3.at[0].set(1.0, mode="wrap"),
     ValueError, "mode must be one of", False),
    ("broadcast mismatch", lambda: x3 + x4, TypeError, "do not broadcast together", True),
    ("lax without broadcasting", lambda: lax.add(x3, x4),
     TypeError, "fnx.lax broadcasts only dimensions of size 1", True),
    ("reshape to another size", lambda: x3.reshape(2, 2),
     TypeError, r"cannot reshape f\d+\[3\] \(3 elements\) to \(2, 2\)", True),
    ("matmul sizes differ", lambda: x3 @ x4, TypeError, "contraction sizes differ", True),
    ("axis out of range", lambda: x3.sum(axis=3),
     ValueError, "axis 3 is out of bounds for an array of rank 1", True),
    ("bad transpose permutation", lambda: jnp.transpose(x3, (1,)),
     ValueError, "out of bounds", True),
    ("scan carry changes dtype",
     lambda: lax.scan(lambda c, x: (c.astype(jnp.int32), x), 0.0, x3),
     TypeError, "carry changes type.*comes out as i32", False),
    ("cond branches differ", lambda: lax.cond(True, lambda: x3, lambda: x4),
     TypeError, "differs between branches", False),
    ("tree_unflatten leaf count", lambda: fnx.tree_util.tree_unflatten(
        fnx.tree_util.tree_structure((1, 2)), [1]),
     ValueError, "expected 2 leaves", False),
    ("tree_map structures differ", lambda: fnx.tree_util.tree_map(lambda a, b: a, (1, 2), (1,)),
     ValueError, "structures differ", False),
    ("jacrev of an integer input", lambda: fnx.jacrev(lambda x: x)(3),
     TypeError, "real- or complex-valued inputs.*allow_int=True", True),
]


@pytest.mark.parametrize("what, mistake, jax_type, message, fnx_error", CASES,
                         ids=[c[0] for c in CASES])
def test_mistake_raises_jax_builtin_type_with_fnx_message(what, mistake, jax_type, message,
                                                          fnx_error):
    with pytest.raises(jax_type, match=message) as info:
        mistake()
    if fnx_error:
        assert isinstance(info.value, FnxError)


def test_error_classes_are_the_builtin_types_jax_uses():
    from fnx import errors
    assert issubclass(errors.ConcretizationError, TypeError)
    assert issubclass(errors.ShapeError, TypeError) and issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.CustomRuleError, TypeError)
    assert issubclass(errors.GradDtypeError, TypeError)
    assert issubclass(errors.GradOutputError, TypeError)
    assert issubclass(errors.ArgnumsError, TypeError)
    assert issubclass(errors.ArgnumsError, ValueError)  # fnx's earlier type, kept
    assert issubclass(errors.TreeMismatchError, TypeError)
    assert issubclass(errors.TreeMismatchError, ValueError)
    assert issubclass(errors.IndexOutOfBoundsError, IndexError)
    assert issubclass(errors.IndexTypeError, IndexError)  # NumPy's type
    assert issubclass(errors.IndexTypeError, TypeError)   # JAX's type
    assert issubclass(errors.MissingRuleError, NotImplementedError)
    assert issubclass(errors.DeletedArrayError, RuntimeError)
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, FnxError) and cls is not FnxError:
            assert cls.__doc__ and len(cls.__doc__) > 40, name  # each explains itself


def test_indexing_errors_carry_jaxs_messages():
    # the messages JAX's own tests match (lax_numpy_indexing_test)
    cases = [(lambda: jnp.zeros(2)[0.0], TypeError,
              "Indexer must have integer or boolean type, got indexer with type float64"),
             (lambda: jnp.zeros((2, 3))[:, "abc"], TypeError,
              "JAX does not support string indexing"),
             (lambda: jnp.arange(4)[jnp.array([True, False])], IndexError,
              "boolean index did not match shape"),
             (lambda: jnp.array(1)[0], IndexError,
              "Too many indices: array is 0-dimensional, but 1 were indexed"),
             (lambda: fnx.jit(lambda v: v[:, 5])(jnp.zeros(3)), IndexError,
              "Too many indices: array is 1-dimensional, but 2 were indexed")]
    for f, cls, msg in cases:
        with pytest.raises(cls, match=msg):
            f()
