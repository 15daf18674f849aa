"""Error classes.

Each error says what went wrong, where (the user's source line when fnx can
find it), and what to do instead. The docstrings show the wrong code next to
the fixed code.
"""


class FnxError(Exception):
    """Base class of every error fnx raises on purpose."""


class ConcretizationError(FnxError, TypeError):
    """A traced value was used where Python needs a concrete one.

    Under ``jit`` (and ``make_ir``/``eval_shape``) arguments are abstract:
    only their shapes and dtypes are known while the function is traced, so
    Python control flow cannot depend on their values::

        @fnx.jit
        def f(x):
            if x > 0:            # ConcretizationError
                return x
            return -x

    Fixed with a traced conditional, or by making the argument static::

        @fnx.jit
        def f(x):
            return fnx.lax.cond(x > 0, lambda x: x, lambda x: -x, x)

        f = fnx.jit(f, static_argnums=0)   # retraces for each new value
    """


class TracerBoolConversionError(ConcretizationError):
    """``bool()`` of a traced value (an ``if`` or ``and`` on it): JAX's name."""


class TracerIntegerConversionError(ConcretizationError):
    """``int()`` or ``operator.index()`` of a traced value: JAX's name."""


class TracerArrayConversionError(ConcretizationError):
    """``np.asarray()`` of a traced value: JAX's name."""


class NonConcreteBooleanIndexError(ConcretizationError, IndexError):
    """Indexing with a traced boolean mask, whose result shape depends on data: JAX's name
    (an ``IndexError`` there, and a ``TypeError`` as fnx's other concretization errors)::

        fnx.jit(lambda x: x[x > 0].sum())        # NonConcreteBooleanIndexError
        fnx.jit(lambda x: fnp.where(x > 0, x, 0).sum())   # the same sum, traceable
    """


# JAX's names for the same errors (``jax.errors``)
ConcretizationTypeError = ConcretizationError


class LeakedTracerError(FnxError):
    """A tracer outlived the trace that made it.

    Values inside a traced function are tracers; storing one in a global or
    an attribute and using it after the trace has ended is an error::

        saved = []
        @fnx.jit
        def f(x):
            saved.append(x)      # the tracer escapes
            return x
        f(1.0); saved[0] + 1     # LeakedTracerError

    Fixed by returning the value from the function instead of storing it.
    """


class ShapeError(FnxError, TypeError, ValueError):
    """An op got operands whose shapes or dtypes it cannot take (JAX raises a
    TypeError for most of these and a ValueError for some, e.g. an axis out of range
    or a bad permutation: this is both, so either ``except`` catches it).

    ``fnx.lax`` ops are strict (no implicit broadcasting or promotion)::

        fnx.lax.add(x_f32_3, y_f32_4)          # ShapeError
        fnx.numpy.add(x, y)                     # broadcasts and promotes
    """


class IRCheckError(FnxError):
    """The IR checker found an equation whose recorded types disagree with
    its primitive's shape/dtype rule, or a variable used before defined.
    This is a bug in a pass or a primitive's rule, not in user code."""


class MissingRuleError(FnxError, NotImplementedError):
    """A primitive lacks the rule a transformation or backend needs (for
    instance a jvp rule under ``grad``, or a NumPy lowering under ``jit``)."""


class DeletedArrayError(FnxError, RuntimeError):
    """An Array was used after its buffer was donated to a jitted function::

        f = fnx.jit(step, donate_argnums=0)
        new = f(params); params + 1          # DeletedArrayError

    Fixed by using the returned value (``new``) instead of the donated one.
    """


class CustomRuleError(FnxError, TypeError):
    """A ``custom_jvp``/``custom_vjp`` rule was used in a way it cannot be, or
    returned values that do not fit the function (a TypeError, as in JAX).

    Forward mode of a ``custom_vjp`` function, which only has a backward pass::

        fnx.jvp(f_with_custom_vjp, (x,), (t,))     # CustomRuleError
        fnx.grad(f_with_custom_vjp)(x)             # reverse mode works

    A ``bwd`` that returns a bare array instead of one cotangent per argument::

        def f_bwd(res, g): return g * res          # CustomRuleError
        def f_bwd(res, g): return (g * res,)       # fixed: a tuple
    """


class GradDtypeError(FnxError, TypeError):
    """``grad`` got inputs or an output of a dtype it cannot differentiate (a
    TypeError, as in JAX).

    Integer inputs have no gradient, and a complex output needs ``holomorphic``::

        fnx.grad(f)(3)                                  # GradDtypeError
        fnx.grad(f)(3.0)                                # fixed: a float input
        fnx.grad(lambda z: z ** 2)(1 + 1j)              # GradDtypeError
        fnx.grad(lambda z: z ** 2, holomorphic=True)(1 + 1j)   # fixed: 2 + 2j
    """


class GradOutputError(FnxError, TypeError):
    """``grad`` of a function whose output is not a scalar (a TypeError, as in JAX)::

        fnx.grad(lambda x: x ** 2)(fnx.numpy.ones(3))          # GradOutputError
        fnx.grad(lambda x: (x ** 2).sum())(fnx.numpy.ones(3))  # fixed: reduce it
        fnx.vmap(fnx.grad(lambda x: x ** 2))(fnx.numpy.ones(3))  # or: per element
    """


class ArgnumsError(FnxError, TypeError, ValueError):
    """``argnums`` names an argument the call does not have (JAX raises a TypeError;
    fnx used to raise a ValueError: this is both)::

        fnx.grad(f, argnums=2)(x, y)       # ArgnumsError: only 2 arguments
        fnx.grad(f, argnums=1)(x, y)       # fixed
    """


class IndexOutOfBoundsError(FnxError, IndexError):
    """A static (Python int) index is out of range.

    This is a deliberate difference from JAX, which silently clamps such an index
    (``x[7]`` of a 5-element array is ``x[4]`` there, and ``x.at[7].set(v)`` is
    dropped). fnx raises instead, as NumPy does; ask for JAX's behaviour explicitly::

        x[7]                                   # IndexOutOfBoundsError
        x.at[7].get(mode="clip")               # x[4], JAX's clamp
        x.at[7].get(mode="fill", fill_value=0) # 0
        x.at[7].set(v, mode="drop")            # x unchanged

    Traced indices (under ``jit``/``vmap``, or index arrays) are never checked: reads
    clamp them and updates drop them, as in JAX.
    """


class IndexTypeError(FnxError, IndexError, TypeError):
    """An index of a type that cannot index (a float, a string): an IndexError as in
    NumPy and a TypeError as in JAX, so either ``except`` catches it::

        x[1.0]                   # IndexTypeError
        x[int(i)]                # fixed; or x[i.astype(int)] for an array of indices
    """


class TreeMismatchError(FnxError, TypeError, ValueError):
    """Two pytrees that must have the same structure do not: primals and tangents of
    ``jvp``/``linearize`` (JAX: TypeError), a cotangent and the output of ``vjp``
    (JAX: ValueError). This is both, so either ``except`` catches it::

        fnx.jvp(f, (x, y), (tx,))          # TreeMismatchError: one tangent per primal
        fnx.jvp(f, (x, y), (tx, ty))       # fixed
    """


class AxesSpecError(FnxError, TypeError, ValueError):
    """``vmap``'s ``in_axes``/``out_axes`` do not fit the call: a leaf that is not an
    int or None (JAX: TypeError), a pytree that is not a prefix of the arguments or
    outputs, or an axis out of range for the value it maps (JAX: ValueError). This is
    both, so either ``except`` catches it::

        fnx.vmap(f, in_axes=0.5)                  # AxesSpecError: not an int
        fnx.vmap(f, in_axes=(0, None))(x, y)      # fixed
        fnx.vmap(f, out_axes=2)(ones((4, 3)))     # AxesSpecError: output rank is 2
        fnx.vmap(f, out_axes=1)(ones((4, 3)))     # fixed: in [-2, 1]
    """


class UnboundAxisError(FnxError, NameError):
    """A collective names an axis that no enclosing ``vmap(..., axis_name=...)`` or
    ``pmap`` binds (JAX: NameError, "unbound axis name")::

        fnx.lax.psum(x, "batch")                                   # UnboundAxisError
        fnx.vmap(lambda v: fnx.lax.psum(v, "batch"), axis_name="batch")(x)   # fixed
    """


class OutOfMemoryError(FnxError, MemoryError):
    """An array larger than this machine's physical memory was asked for. fnx raises
    at once, before any work, instead of returning a view no computation could finish
    with (JAX's allocator fails the same way: RESOURCE_EXHAUSTED)::

        fnx.numpy.zeros((10**6, 10**6))             # OutOfMemoryError: 4 TB of float32
        fnx.numpy.zeros((10**4, 10**4))             # fixed: 400 MB
    """


UnexpectedTracerError = LeakedTracerError   # JAX's name
