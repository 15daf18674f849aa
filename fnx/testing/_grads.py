"""``check_grads``: numerical checks of forward and reverse mode, with readable failures.

What is compared
----------------
For a function ``f`` and a point ``args`` (a tuple of pytrees), only the
float and complex leaves of ``args`` are differentiated. Integer, bool and
non-array leaves (Python ints used as static parameters, strings, ...) are
held fixed: ``f`` always receives them unchanged. This matches ``fnx.jvp``,
where integer primals carry no tangent (their tangents are integer zeros and
``vjp`` returns integer zeros for them). Outputs that are not float or
complex (``argmax``, comparisons) carry no derivative and are not compared.

- ``"fwd"``: ``fnx.jvp(f, args, t)`` against the central difference
  ``(f(x + eps t) - f(x - eps t)) / (2 eps)`` along a random direction ``t``,
  output leaf by output leaf, elementwise.
- ``"rev"``: ``fnx.vjp`` through the dot-product identity
  ``<ct, J t> == <J* ct, t>`` for random ``ct`` and ``t``, where ``J t``
  comes from the finite differences, so a wrong reverse rule is caught even
  where forward mode does not exist (``custom_vjp``); when ``fnx.jvp`` works
  too, the vjp is also compared with it, and the failure message says which of
  the two derivatives agrees with the finite differences (fnx derives reverse
  mode from the jvp rules, so a wrong *jvp* rule makes both disagree, and a
  wrong *transpose* rule or ``custom_vjp`` backward pass makes only the vjp
  disagree). For complex values the inner product is ``Re(sum(conj(a) * b))``
  and ``J* ct`` is ``conj(vjp(conj(ct)))``, as in JAX.
- ``order=2`` also checks the derivative functions themselves with order 1:
  for "fwd", ``(x, t) -> jvp(f, x, t)[1]`` (its derivative in ``x`` is the
  second derivative of ``f``; in ``t`` it checks that the jvp is linear), and
  for "rev", ``(x, ct) -> vjp(f, x)[1](ct)``; both are checked in the
  requested modes, and so on for higher orders.

The arguments (differentiated leaves) are perturbed one at a time, so a wrong
derivative with respect to a small argument cannot hide behind a large one,
and a failure names its argument. In reverse mode the direction for each
argument is a random one plus the vjp's own cotangent for it (scaled to
entries of size ~1): along the cotangent every term of ``<J* ct, t>`` is
positive, so an error cannot vanish in a sum that cancels by chance. The
output is named by repeating a failed reverse-mode check with the cotangent
on one output at a time.

Precision and tolerances
------------------------
The finite differences are computed in 64 bits where possible: float16,
bfloat16, float32 and complex64 inputs are cast to float64/complex128 (the
cast is exact) and ``f`` is evaluated on those. That is used only if ``f``
accepts them and returns 64-bit values for every float output; otherwise (a
``fnx.lax`` op mixing the argument with a float32 constant raises, an
explicit ``astype(float32)`` keeps 32 bits, ...) the differences are taken in
the inputs' own dtype with a larger step, and the derivatives are compared
along the direction ``(x+ - x-) / (2 eps)`` that the rounded points ``x+-``
actually follow. Either way the derivatives under test are computed by fnx in
the inputs' own dtype.

Defaults (``default_tolerances``) are keyed on the least precise float dtype
among the differentiated inputs and float outputs:

==========  =========================  ===================================
dtype       64-bit reference           reference in the dtype itself
==========  =========================  ===================================
float16     eps 1e-5, rtol 2e-2        eps 3e-2, rtol 1e-1
bfloat16    eps 1e-5, rtol 1e-1        eps 1e-1, rtol 2e-1
float32     eps 1e-5, rtol 2e-3        eps 1e-3, rtol 2e-2
float64     eps 1e-5, rtol 1e-6        (the same)
==========  =========================  ===================================

(complex64 and complex128 as float32 and float64). ``eps`` is an absolute
step along directions whose entries are of size ~1 (standard normal). An element passes when
``|derivative - reference| <= atol + rtol * |reference|``; unless ``atol`` is
given it is ``rtol`` times the largest magnitude in that output leaf (the
comparison is normwise per output, so a small element that is a difference
of large terms is not held to a relative accuracy it cannot have), plus
``16 * machine-epsilon * max |f(x)|`` for outputs that are zero by
cancellation, plus ``4 * machine-epsilon * max |f(x +- eps t)| / eps``, the
rounding error of the differences themselves (in the dtype they are taken in).
Reverse-mode inner products pass when they agree within
``atol + rtol * (sum of |terms|)``. A given ``atol`` is used as is.
"""
from __future__ import annotations

import inspect

import numpy as np

from .. import tree_util
from .._config import enable_x64
from ..core import dtypes
from ..core.array import Array, to_array
from ..errors import FnxError
from ..transforms.jvp import jvp
from ..transforms.vjp import vjp

__all__ = ["check_grads", "default_tolerances"]

_MODES = ("fwd", "rev")
_EPS_WIDE = 1e-5
# precision name -> (rtol with a 64-bit reference, eps and rtol in the dtype itself)
_TABLE = {
    "float16": (2e-2, 3e-2, 1e-1),
    "bfloat16": (1e-1, 1e-1, 2e-1),
    "float32": (2e-3, 1e-3, 2e-2),
    "float64": (1e-6, 1e-5, 1e-6),
}


def _precision(dtype):
    """'float16' / 'bfloat16' / 'float32' / 'float64' for an inexact dtype."""
    dtype = np.dtype(dtype)
    if dtypes.bfloat16 is not None and dtype == dtypes.bfloat16:
        return "bfloat16"
    if dtype.kind == "c":
        return "float32" if dtype.itemsize <= 8 else "float64"
    return {2: "float16", 4: "float32"}.get(dtype.itemsize, "float64")


def _wide(dtype):
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


def _is_wide(dtype):
    return np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))


def _machine_eps(dtype):
    return float(dtypes.finfo(dtype).eps)


def default_tolerances(dtype, wide_reference=True):
    """``{"eps": ..., "rtol": ...}``: check_grads' defaults for ``dtype`` (the least
    precise float dtype involved), with a 64-bit finite-difference reference or not."""
    wide_rtol, native_eps, native_rtol = _TABLE[_precision(dtype)]
    if wide_reference:
        return {"eps": _EPS_WIDE, "rtol": wide_rtol}
    return {"eps": native_eps, "rtol": native_rtol}


# --- small helpers ----------------------------------------------------------------------------

def _short(dtype):
    return dtypes.short_name(np.dtype(dtype))


def _sig(x):
    return f"{_short(x.dtype)}[{','.join(map(str, np.shape(x)))}]"


def _fmt(v):
    if isinstance(v, (complex, np.complexfloating)):
        return f"{complex(v):.9g}"
    if isinstance(v, (bool, np.bool_, int, np.integer)):
        return str(v)
    return f"{float(v):.9g}"


def _fmt_array(a, limit=8):
    flat = np.asarray(a).ravel()
    body = ", ".join(_fmt(v) for v in flat[:limit])
    return "[" + body + (", ..." if flat.size > limit else "") + "]"


def _is_diff_leaf(leaf):
    """Float/complex array-likes are differentiated; everything else is held fixed."""
    if isinstance(leaf, (bool, int, np.bool_, np.integer)):
        return False
    if isinstance(leaf, (float, complex)):
        return True
    dt = getattr(leaf, "dtype", None)
    if dt is None:
        return False
    try:
        return dtypes.is_inexact(np.dtype(dt))
    except TypeError:
        return False


def _fixed_reason(leaf):
    dt = getattr(leaf, "dtype", None)
    if isinstance(leaf, (bool, np.bool_)) or (dt is not None and np.dtype(dt).kind == "b"):
        return "bool"
    if isinstance(leaf, (int, np.integer)) or (dt is not None and np.dtype(dt).kind in "iu"):
        return "integer"
    return "not an array"


def _describe_leaf(name, leaf):
    if _is_diff_leaf(leaf):
        return f"{name}: {_sig(to_array(leaf))}"
    if hasattr(leaf, "dtype") and hasattr(leaf, "shape"):
        return f"{name}: {_sig(leaf)} (held fixed: {_fixed_reason(leaf)})"
    return f"{name}: {type(leaf).__name__} {leaf!r:.40} (held fixed: {_fixed_reason(leaf)})"


def _where(f):
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)
    try:
        src = inspect.getsourcefile(f)
        line = inspect.getsourcelines(f)[1]
        return f"{name} ({src}:{line})"
    except (TypeError, OSError):
        return name


def _vdot_re(a, b):
    """Re(sum(conj(a) * b)) in 64 bits."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        return float(np.real(np.vdot(a.astype(np.complex128).ravel(),
                                     b.astype(np.complex128).ravel())))
    return float(np.dot(a.astype(np.float64).ravel(), b.astype(np.float64).ravel()))


def _abs_dot(a, b):
    return float(np.sum(np.abs(np.asarray(a).astype(_wide(a.dtype))) *
                        np.abs(np.asarray(b).astype(_wide(b.dtype)))))


def _finite_max(a):
    a = np.abs(np.asarray(a))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def _as_arrays(outs):
    return [o if isinstance(o, Array) else to_array(o) for o in outs]


# --- the check of one function at one order -----------------------------------------------------

class _Level:
    """First derivatives of one flat function ``fn(*xs) -> list of arrays`` at ``xs``."""

    def __init__(self, fn, xs, weak, in_names, out_names, *, title, depth, order, modes,
                 rtol, atol, eps, seed, context):
        self.fn = fn
        self.xs = [np.asarray(x) for x in xs]
        self.weak = list(weak)
        self.in_names = list(in_names)
        self.out_names = out_names          # a list, or a callable giving it after a call
        self.title = title                  # what the checked function is, in words
        self.depth = depth                  # 0: first derivatives of the user's f
        self.order = order
        self.modes = modes
        self.user_rtol, self.user_atol, self.user_eps = rtol, atol, eps
        self.atol_given = None
        self.seed = seed
        self.context = context              # lines describing the user's f and args
        self.rng = np.random.default_rng([seed, depth, _branch_code(title)])
        self.rounding_scale = 1.0           # 1.5 while comparing with Richardson's estimate

    # evaluation ---------------------------------------------------------------
    def arrays(self, values, wide=False):
        out = []
        for v, w in zip(values, self.weak):
            v = np.asarray(v)
            if wide:
                v = v.astype(_wide(v.dtype))
            out.append(Array._wrap(np.array(v), w))
        return out

    def call(self, values, wide=False):
        return [np.asarray(o) for o in _as_arrays(self.fn(*self.arrays(values, wide)))]

    def jvp(self, ts):
        _, out_t = jvp(self.fn, tuple(self.arrays(self.xs)),
                       tuple(Array._wrap(np.asarray(t, x.dtype)) for t, x in zip(ts, self.xs)))
        return [np.asarray(o) for o in _as_arrays(out_t)]

    def adjoint(self, cts):
        """``J* ct`` (conj of vjp of conj ct), one array per input."""
        _, f_vjp = vjp(self.fn, *self.arrays(self.xs))
        ct_in = [Array._wrap(np.conj(c) if c.dtype.kind == "c" else c) for c in cts]
        res = f_vjp(ct_in)
        return [np.conj(np.asarray(r)) for r in res]

    # setup --------------------------------------------------------------------
    def setup(self):
        self.ys = self.call(self.xs)
        if callable(self.out_names):        # the user's f: names from its output pytree
            self.out_names = self.out_names()
        if self.out_names is None:
            self.out_names = [f"out{i}" for i in range(len(self.ys))]
        self.out_inexact = [j for j, y in enumerate(self.ys) if dtypes.is_inexact(y.dtype)]
        if not self.xs or not self.out_inexact:
            return False
        in_dt = [x.dtype for x in self.xs]
        out_dt = [self.ys[j].dtype for j in self.out_inexact]
        self.ad_dtype = max(in_dt + out_dt, key=_machine_eps)    # least precise
        self.wide = self._probe_wide()
        tols = default_tolerances(self.ad_dtype, wide_reference=self.wide)
        self.eps, self.rtol = tols["eps"], tols["rtol"]
        self.fd_mag = {}
        # JAX's tolerances may be dicts by dtype (read at the least precise dtype; a
        # dtype without an entry keeps the default)
        self.atol_given = _tol_for(self.user_atol, self.ad_dtype)
        eps, rtol = _tol_for(self.user_eps, self.ad_dtype), _tol_for(self.user_rtol,
                                                                     self.ad_dtype)
        if eps is not None:
            self.eps = float(eps)
        if rtol is not None:
            self.rtol = float(rtol)
        return True

    def _probe_wide(self):
        """Can the reference be computed on 64-bit inputs with 64-bit outputs?"""
        self.wide_reason = ""
        if all(_is_wide(x.dtype) for x in self.xs):
            bad = [self.out_names[j] for j in self.out_inexact if not _is_wide(self.ys[j].dtype)]
            if bad:
                self.wide_reason = f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} " \
                                   "not 64-bit"
            return not bad
        try:
            ys = self.call(self.xs, wide=True)
        except Exception as e:  # noqa: BLE001  (any failure: the function wants its dtypes)
            self.wide_reason = f"f rejects 64-bit inputs ({type(e).__name__}: " \
                               f"{str(e).splitlines()[0][:120] if str(e) else ''})"
            return False
        if len(ys) != len(self.ys) or any(a.shape != b.shape for a, b in zip(ys, self.ys)):
            self.wide_reason = "f returns differently shaped outputs for 64-bit inputs"
            return False
        narrow = [self.out_names[j] for j in self.out_inexact if not _is_wide(ys[j].dtype)]
        if narrow:
            self.wide_reason = f"{', '.join(narrow)} stays below 64 bits for 64-bit inputs"
            return False
        return True

    # random directions ---------------------------------------------------------
    def random_like(self, a):
        a = np.asarray(a)
        r = self.rng.standard_normal(a.shape)
        if a.dtype.kind == "c":
            r = r + 1j * self.rng.standard_normal(a.shape)
        return np.asarray(r).astype(a.dtype)

    def fd(self, ts, h=None):
        """Central differences along ``ts`` for the float outputs (64-bit arrays), and the
        direction they actually follow: in the inputs' own dtype ``x +- eps t`` rounds, so
        that direction is ``(x+ - x-) / (2 eps)`` (rounded to the dtype: a relative error of
        one ulp), which is what the derivatives are then compared along. ``h``: the step
        (``eps`` unless given)."""
        h = self.eps if h is None else h
        plus, minus, used = [], [], []
        for x, t in zip(self.xs, ts):
            w = _wide(x.dtype)
            xp = x.astype(w) + h * t.astype(w)
            xm = x.astype(w) - h * t.astype(w)
            if self.wide:
                used.append(t)
            else:
                xp, xm = xp.astype(x.dtype), xm.astype(x.dtype)
                used.append(((xp.astype(w) - xm.astype(w)) / (2 * h)).astype(x.dtype))
            plus.append(xp)
            minus.append(xm)
        yp, ym = self.call(plus, self.wide), self.call(minus, self.wide)
        out = {}
        for j in self.out_inexact:
            w = _wide(self.ys[j].dtype)
            out[j] = (yp[j].astype(w) - ym[j].astype(w)) / (2 * h)
            # the size of the values whose difference is taken (for its rounding error)
            self.fd_mag[j] = max(_finite_max(yp[j]), _finite_max(ym[j]),
                                 _finite_max(self.ys[j]))
        return out, used

    def richardson(self, ts, ref):
        """A second opinion where the derivative disagreed with the differences ``ref``
        (step h along ``ts``): ``(4 D(h) - D(2h)) / 3``, which cancels their h**2 error
        term, or None where the differences are not taken in 64 bits (the rounded points
        would follow another direction at 2h). A function whose third derivative dwarfs its
        first at x (x**-3 near 0) leaves D(h) off by more than the tolerance; a wrong
        derivative stays wrong against this one."""
        if not self.wide:
            return None
        ref2, _ = self.fd(ts, h=2 * self.eps)
        return {j: (4 * ref[j] - ref2[j]) / 3 for j in ref}

    def only(self, k, ts):
        return [t if i == k else np.zeros_like(t) for i, t in enumerate(ts)]

    # comparisons ---------------------------------------------------------------
    def compare(self, j, ad, ref):
        """None if output ``j``'s derivative ``ad`` matches ``ref``, else a dict of facts."""
        ad = np.asarray(ad)
        w = _wide(ad.dtype)
        a, r = ad.astype(w), np.asarray(ref).astype(w)
        fin = np.isfinite(a) & np.isfinite(r)
        same = (a == r) | (np.isnan(a) & np.isnan(r))
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(fin, np.abs(a - r), np.where(same, 0.0, np.inf))
        scale = max(_finite_max(r), _finite_max(a))
        if self.atol_given is not None:
            atol = float(self.atol_given)
            atol_how = "given"
        else:
            fmax = _finite_max(self.ys[j])
            atol = (self.rtol * scale + 16 * _machine_eps(self.ad_dtype) * fmax
                    + self.fd_rounding(j) * self.rounding_scale)
            atol_how = ("rtol * largest |value| of this output + 16 eps |f(x)| + "
                        "4 eps |f(x)| / step (rounding in the differences)")
        with np.errstate(invalid="ignore", over="ignore"):
            allowed = atol + self.rtol * np.where(np.isfinite(r), np.abs(r), 0.0)
            bad = err > allowed
        if not bad.any():
            return None
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            excess = np.where(bad, err - allowed, -np.inf)
            rel = np.where(np.abs(r) > 0, err / np.abs(r), np.where(err > 0, np.inf, 0.0))
        worst = np.unravel_index(int(np.argmax(excess)), err.shape) if err.ndim else ()
        return {"j": j, "n_bad": int(bad.sum()), "size": int(bad.size),
                "idx": tuple(int(i) for i in worst), "got": ad[worst],
                "want": np.asarray(ref)[worst], "max_abs": float(np.max(err)),
                "max_rel": float(np.max(rel)), "atol": atol, "atol_how": atol_how,
                "nonfinite": bool((~np.isfinite(r) & ~same).any()),
                "ad_nonfinite": bool((~np.isfinite(a) & ~same).any())}

    def compare_all(self, ad, ref):
        for j in self.out_inexact:
            res = self.compare(j, ad[j], ref[j])
            if res is not None:
                return res
        return None

    def fd_rounding(self, j):
        """The finite differences' own rounding error in output ``j``: f(x +- h) are each
        rounded (in the dtype the differences are taken in) and divided by 2h."""
        fd_dtype = _wide(self.ys[j].dtype) if self.wide else self.ys[j].dtype
        mag = self.fd_mag.get(j, _finite_max(self.ys[j]))
        return 4 * _machine_eps(fd_dtype) * mag / self.eps

    def ip_close(self, lhs, rhs, mag, cts=None):
        if self.atol_given is not None:
            atol = float(self.atol_given)
        else:   # <ct, J t> inherits the differences' rounding, weighted by |ct|
            atol = sum(float(np.sum(np.abs(cts[j]))) * self.fd_rounding(j)
                       for j in self.out_inexact) * self.rounding_scale \
                if cts is not None else 0.0
        tol = atol + self.rtol * mag
        return abs(lhs - rhs) <= tol or (np.isnan(lhs) and np.isnan(rhs)), tol

    # the checks ------------------------------------------------------------------
    def direction(self, k, adj):
        """The direction for argument ``k``: random (entries of size ~1), plus, in reverse
        mode, the vjp's own cotangent scaled likewise. Along the cotangent every term of
        ``<J* ct, t>`` is positive, so a wrong vjp cannot hide in a sum that cancels by
        chance; the random part catches a vjp that is wrongly zero."""
        x = self.xs[k]
        r = self.random_like(x).astype(_wide(x.dtype))
        if adj is not None and x.size:
            a = np.asarray(adj[k]).astype(_wide(x.dtype))
            rms = float(np.sqrt(np.mean(np.abs(a) ** 2))) if np.isfinite(a).all() else 0.0
            if rms > 0:
                r = r + a / rms
        return r.astype(x.dtype)

    def run(self):
        if not self.setup():
            return
        cts = adj = None
        if "rev" in self.modes:
            cts = [self.random_like(y) if j in self.out_inexact else np.zeros_like(y)
                   for j, y in enumerate(self.ys)]
            try:
                adj = self.adjoint(cts)
            except Exception as e:
                _annotate(e, self, "rev")
                raise
        dirs = [self.direction(k, adj) for k in range(len(self.xs))]
        # One argument at a time: a wrong derivative in a small argument cannot hide
        # behind a large one, and a failure names its argument.
        for k, x in enumerate(self.xs):
            if not x.size:
                continue
            ref, ts = self.fd(self.only(k, dirs))
            second = []     # the Richardson differences, made once if either mode needs them

            def second_opinion():
                if not second:
                    second.append(self.richardson(self.only(k, dirs), ref))
                return second[0]
            if "fwd" in self.modes:
                try:
                    ad = self.jvp(ts)
                except Exception as e:
                    _annotate(e, self, "fwd")
                    raise
                bad = self.compare_all(ad, ref)
                if bad is not None and not self.agrees_with(
                        second_opinion(), lambda r: self.compare_all(ad, r) is None):
                    self.fail_fwd(k, bad)
            if "rev" in self.modes:
                lhs = _vdot_re(adj[k], ts[k])

                def rev_close(r):
                    rhs = sum(_vdot_re(cts[j], r[j]) for j in self.out_inexact)
                    mag = _abs_dot(adj[k], ts[k]) + \
                        sum(_abs_dot(cts[j], r[j]) for j in self.out_inexact)
                    return self.ip_close(lhs, rhs, mag, cts)[0]
                # NaN on both sides (f is NaN near the point) passes, as in JAX
                nan_both = np.isnan(lhs) and np.isnan(
                    sum(_vdot_re(cts[j], ref[j]) for j in self.out_inexact))
                if (not np.isfinite(lhs) and not nan_both) or not (
                        rev_close(ref) or self.agrees_with(second_opinion(), rev_close)):
                    self.fail_rev(k, cts, ts, adj, ref)
        if self.order > self.depth + 1:
            if "fwd" in self.modes:
                self.child_fwd().run()
            if "rev" in self.modes:
                self.child_rev().run()

    def agrees_with(self, richardson, close):
        """Whether ``close(richardson)`` holds, the differences' rounding counted 1.5 times
        (Richardson's combination weighs D(h)'s rounding by 4/3 and D(2h)'s by 1/3)."""
        if richardson is None:
            return False
        self.rounding_scale = 1.5
        try:
            return close(richardson)
        finally:
            self.rounding_scale = 1.0

    # children (order > 1) ----------------------------------------------------------
    def child_fwd(self):
        fn, n, keep = self.fn, len(self.xs), list(self.out_inexact)

        def jvp_of_f(*xs_ts):
            xs, ts = xs_ts[:n], xs_ts[n:]
            _, out_t = jvp(fn, tuple(xs), tuple(ts))
            out_t = _as_arrays(out_t)
            return [out_t[j] for j in keep]

        ts = [self.random_like(x) for x in self.xs]
        return self.child(jvp_of_f, self.xs + ts, self.weak + [False] * n,
                          self.in_names + [f"tangent of {nm}" for nm in self.in_names],
                          [f"tangent of {self.out_names[j]}" for j in keep],
                          f"jvp({self.title_fn}): (x, t) -> jvp({self.title_fn}, x, t)[1]")

    def child_rev(self):
        fn, n, keep, ys = self.fn, len(self.xs), list(self.out_inexact), self.ys

        def vjp_of_f(*xs_cts):
            xs, given = xs_cts[:n], xs_cts[n:]
            _, f_vjp = vjp(fn, *xs)
            cts = [Array._wrap(np.zeros_like(y)) for y in ys]
            for j, c in zip(keep, given):
                cts[j] = c
            return list(f_vjp(cts))

        cts = [self.random_like(self.ys[j]) for j in keep]
        return self.child(vjp_of_f, self.xs + cts, self.weak + [False] * len(keep),
                          self.in_names + [f"cotangent of {self.out_names[j]}" for j in keep],
                          [f"cotangent of {nm}" for nm in self.in_names],
                          f"vjp({self.title_fn}): (x, ct) -> vjp({self.title_fn}, x)[1](ct)")

    @property
    def title_fn(self):
        return self.title.split(":")[0]

    def child(self, fn, xs, weak, in_names, out_names, title):
        return _Level(fn, xs, weak, in_names, out_names, title=title, depth=self.depth + 1,
                      order=self.order, modes=self.modes, rtol=self.user_rtol,
                      atol=self.user_atol, eps=self.user_eps, seed=self.seed,
                      context=self.context)

    # failure reports ------------------------------------------------------------------
    def header(self, mode):
        how = {"fwd": "forward mode (fnx.jvp) against central finite differences",
               "rev": "reverse mode (fnx.vjp) through <ct, J t> == <J* ct, t>"}[mode]
        order = self.depth + 1
        lines = [f"check_grads: {mode} mode failed at order {order} (of {self.order}): {how}.",
                 f"  checked function: {self.title}"]
        if self.depth:
            lines.append(f"    (order {order} = first derivatives of this function = "
                         f"derivatives of order {order} of f)")
        return lines

    def footer(self):
        ref = (f"in 64 bits (inputs cast from {_short(self.ad_dtype)})" if self.wide and
               not _is_wide(self.ad_dtype) else "in 64 bits" if self.wide else
               f"in the inputs' own dtypes ({self.wide_reason})")
        ins = ", ".join(f"{nm}: {_sig(x)}" for nm, x in zip(self.in_names, self.xs))
        lines = [f"  finite differences: eps={self.eps:g}, evaluated {ref}"]
        if self.depth:
            lines.append(f"  inputs of the checked function: {ins}")
        lines += self.context
        return lines

    def leaf_line(self, what, i):
        x = self.xs[i]
        return f"  {what}: {self.in_names[i]}  {_sig(x)}"

    def out_line(self, j):
        return f"  output:   {self.out_names[j]}  {_sig(self.ys[j])}"

    def error_lines(self, res, got_name, want_name="finite differences"):
        idx = res["idx"]
        where = f"at index {idx}" if idx else "(a scalar)"
        lines = [(f"  max abs error: {res['max_abs']:.3g} {where}: {got_name} gives "
                  f"{_fmt(res['got'])}, {want_name} give {_fmt(res['want'])} "
                  f"({res['n_bad']} of {res['size']} elements outside the tolerance)"),
                 f"  max rel error: {res['max_rel']:.3g}",
                 (f"  tolerance: |{got_name} - reference| <= atol + rtol * |reference| with "
                  f"rtol={self.rtol:g}, atol={res['atol']:.3g} ({res['atol_how']})")]
        if res["nonfinite"]:
            lines.append("  note: the finite differences are not finite there: x +- eps*t may "
                         "leave f's domain or cross a singularity; move the point or pass a "
                         "smaller eps")
        elif res["ad_nonfinite"]:
            lines.append(f"  note: {got_name} is not finite where the finite differences are")
        return lines

    def fail_fwd(self, k, res):
        lines = self.header("fwd")
        lines.append(self.leaf_line("argument", k) +
                     ("   (perturbed alone)" if len(self.xs) > 1 else ""))
        lines.append(self.out_line(res["j"]))
        lines += self.error_lines(res, "jvp")
        lines += self.footer()
        raise AssertionError("\n".join(lines))

    def fail_rev(self, k, cts, ts, adj, ref):
        lines = self.header("rev")
        outs = self.out_inexact
        lines.append(self.leaf_line("argument", k))
        # Which output: the cotangent on one output at a time.
        j_bad, adj_j = None, adj
        if len(outs) > 1:
            for j in outs:
                cj = [c if i == j else np.zeros_like(c) for i, c in enumerate(cts)]
                aj = self.adjoint(cj)
                lhs_j, rhs_j = _vdot_re(aj[k], ts[k]), _vdot_re(cts[j], ref[j])
                mag = _abs_dot(aj[k], ts[k]) + _abs_dot(cts[j], ref[j])
                if not self.ip_close(lhs_j, rhs_j, mag, cj)[0] or not np.isfinite(lhs_j):
                    j_bad, adj_j = j, aj
                    break
        else:
            j_bad = outs[0]
        if j_bad is None:
            lines.append("  output:   all outputs together (no single one reproduces the "
                         "failure)")
        else:
            lines.append(self.out_line(j_bad))
        lhs = _vdot_re(adj[k], ts[k])
        rhs = sum(_vdot_re(cts[j], ref[j]) for j in outs)
        mag = _abs_dot(adj[k], ts[k]) + sum(_abs_dot(cts[j], ref[j]) for j in outs)
        tol = self.ip_close(lhs, rhs, mag, cts)[1]
        lines.append(f"  <J* ct, t> from the vjp: {lhs:.8g}; <ct, J t> from finite differences: "
                     f"{rhs:.8g}; difference {abs(lhs - rhs):.3g}, tolerance {tol:.3g} "
                     f"(atol + rtol={self.rtol:g} times the sums of |terms| of both sides)")
        if not all(np.isfinite(ref[j]).all() for j in outs):
            lines.append("  note: the finite differences are not finite: x +- eps*t may leave "
                         "f's domain or cross a singularity; move the point or pass a smaller "
                         "eps")
        lines += self.diagnose_rev(k, j_bad, cts, ts, adj_j, lhs, rhs)
        lines += self.footer()
        raise AssertionError("\n".join(lines))

    def diagnose_rev(self, k, j, cts, ts, adj_j, lhs, rhs):
        lines = []
        # vjp against jvp: which of the two derivatives is wrong?
        try:
            ad = self.jvp(ts)
        except Exception as e:  # noqa: BLE001  (custom_vjp: no forward mode)
            lines.append(f"  fnx.jvp is not available here ({type(e).__name__}), so the vjp "
                         "was compared with finite differences only")
        else:
            outs = self.out_inexact
            jv = sum(_vdot_re(cts[i], ad[i]) for i in outs)
            mag = sum(_abs_dot(cts[i], ad[i]) for i in outs)
            vjp_ok = self.ip_close(lhs, jv, mag + abs(lhs))[0]
            jvp_ok = self.ip_close(jv, rhs, mag + abs(rhs), cts)[0]
            lines.append(f"  <ct, J t> from fnx.jvp: {jv:.8g}")
            if vjp_ok and not jvp_ok:
                lines.append("  diagnosis: the vjp agrees with fnx.jvp, and both disagree with "
                             "finite differences: the jvp rule is wrong (fnx derives reverse "
                             "mode from the jvp rules)")
            elif jvp_ok and not vjp_ok:
                lines.append("  diagnosis: fnx.jvp agrees with finite differences but the vjp "
                             "does not: a transpose rule (or a custom_vjp backward pass) is "
                             "wrong")
        # Elementwise, for a small argument: J* ct from finite differences along each basis
        # vector of that argument.
        if j is not None and self.xs[k].size <= 32:
            x = self.xs[k]
            want = np.zeros(x.shape, _wide(x.dtype))
            for pos in np.ndindex(*x.shape) if x.ndim else [()]:
                for unit in ((1.0, 1j) if x.dtype.kind == "c" else (1.0,)):
                    e = np.zeros(x.shape, x.dtype)
                    e[pos] = unit
                    es = [e if i == k else np.zeros_like(xx) for i, xx in enumerate(self.xs)]
                    r, used = self.fd(es)
                    step = abs(complex(used[k][pos]))
                    d = _vdot_re(cts[j], r[j]) / step if step else np.nan
                    want[pos] += d * (1.0 if unit == 1.0 else 1j)
            lines.append(f"  J* ct for {self.in_names[k]} (ct on {self.out_names[j]} only):")
            lines.append(f"    vjp gives                {_fmt_array(adj_j[k])}")
            lines.append(f"    finite differences give  {_fmt_array(want)}")
        return lines


def _branch_code(title):
    return sum(ord(c) for c in title.split(":")[0]) % 100003


def _annotate(e, level, mode):
    """Say where in check_grads an exception (a missing rule, a custom_vjp used in forward
    mode, ...) came from, without changing its type."""
    note = (f"(raised by check_grads in {mode} mode at order {level.depth + 1} while "
            f"differentiating {level.title.split(':')[0]}; inputs "
            f"{', '.join(f'{nm}: {_sig(x)}' for nm, x in zip(level.in_names, level.xs))})")
    if mode == "fwd" and isinstance(e, FnxError) and "forward mode" in str(e):
        note += "; check_grads(..., modes=('rev',)) checks reverse mode only"
    if hasattr(e, "add_note"):
        e.add_note(note)


# --- the public entry point -------------------------------------------------------------------

def _tol_for(tol, dtype):
    """A tolerance as JAX's ``check_grads`` takes it: a number, None, or a dict by dtype
    (the entry for ``dtype``, None where it has none)."""
    if not isinstance(tol, dict):
        return tol
    return {np.dtype(k): v for k, v in tol.items()}.get(np.dtype(dtype))


def check_grads(f, args, order=2, modes=("fwd", "rev"), atol=None, rtol=None, eps=None, *,
                seed=0):
    """Check ``f``'s forward- and reverse-mode derivatives at ``args`` numerically.

    The check runs with ``jax_enable_x64`` on (restored afterwards): its differences and
    references are taken in float64/complex128, which would otherwise narrow to 32 bits.

    ``f(*args)`` returns a pytree of arrays; ``args`` is a tuple of pytrees whose float
    and complex leaves are differentiated (integer, bool and other leaves are held
    fixed). ``order`` (>= 1) is the highest derivative order checked; ``modes`` is a
    subset of ``("fwd", "rev")``. ``atol``/``rtol``/``eps`` override the dtype-aware
    defaults (see the module docstring and ``default_tolerances``); as in JAX each may be
    a dict by dtype, read at the least precise dtype involved. The random
    directions come from ``numpy.random.default_rng`` seeded with ``seed``, so a
    failure is reproducible.

    Raises ``AssertionError`` naming the mode, the order, the argument (its index and
    pytree path) and the output that disagree, the errors and tolerances, and the
    shapes and dtypes of the inputs. Errors raised by fnx itself (a missing rule, say)
    propagate with a note saying which check raised them.
    """
    with enable_x64():
        return _check_grads(f, args, order, modes, atol, rtol, eps, seed)


def _check_grads(f, args, order, modes, atol, rtol, eps, seed):
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"check_grads: args must be a tuple of arguments (one entry per "
                        f"positional argument of f), got {type(args).__name__}")
    if isinstance(modes, str):
        modes = (modes,)
    modes = tuple(modes)
    unknown = [m for m in modes if m not in _MODES]
    if unknown or not modes:
        raise ValueError(f"check_grads: modes must be a non-empty subset of {_MODES}, "
                         f"got {modes!r}")
    if not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"check_grads: order must be an int >= 1, got {order!r}")

    with_path, tree = tree_util.tree_flatten_with_path(tuple(args))
    names = [f"args{tree_util.keystr(p)}" for p, _ in with_path]
    leaves = [leaf for _, leaf in with_path]
    diff = [i for i, leaf in enumerate(leaves) if _is_diff_leaf(leaf)]
    xs = [to_array(leaves[i]) for i in diff]
    out_names_box = [None]

    def flat_f(*dx):
        full = list(leaves)
        for i, v in zip(diff, dx):
            full[i] = v
        out = f(*tree_util.tree_unflatten(tree, full))
        out_with_path, _ = tree_util.tree_flatten_with_path(out)
        if out_names_box[0] is None:
            out_names_box[0] = [f"out{tree_util.keystr(p)}" if p else "out"
                                for p, _ in out_with_path]
        return _as_arrays([o for _, o in out_with_path])

    context = [f"  f: {_where(f)}",
               "  arguments of f: " + ", ".join(_describe_leaf(n, leaf)
                                                for n, leaf in zip(names, leaves)),
               f"  seed={seed} (check_grads(..., seed=...) to vary the random directions)"]
    _Level(flat_f, [np.asarray(x) for x in xs], [x.weak_type for x in xs],
           [names[i] for i in diff], lambda: out_names_box[0], title="f", depth=0,
           order=int(order), modes=modes, rtol=rtol, atol=atol, eps=eps, seed=seed,
           context=context).run()
