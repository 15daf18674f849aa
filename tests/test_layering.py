"""The layering of fnx's modules (issue 18), held as a ratchet.

fnx's packages form layers, each importing only from layers below it:

    core < interpreters < lax < backends < public API < libraries < the ``fnx`` package root

The import graph is read from the source with ``ast``, counting *every* import: module level
and function-local alike (a function-local import that dodges a cycle at import time is still
a dependency). Three things are checked against explicit allowlists below, which hold the
violations that exist today and may only shrink:

* an import from a lower layer of a higher one (``UPWARD_EDGES``);
* a private name (leading underscore, not a dunder) of one package used by another, by
  ``from m import _x``, by ``m._x`` on an imported module, or by importing another package's
  private module (``PRIVATE_CROSSINGS``). A package is a top-level one (``fnx.lax``,
  ``fnx.scipy`` with its subpackages) or ``fnx`` itself for the modules directly in fnx/;
  the private modules directly in fnx/ (``_config``, ``_api``) are fnx's, open to all;
* a built-in primitive whose lowering for some backend is registered outside the module that
  defines the primitive (``FOREIGN_LOWERINGS``): ``Primitive.module`` against the module
  whose import ran the registration, recorded by importing fnx in a fresh interpreter.

A new violation fails the first test of its kind; a violation that was fixed fails the second
(its allowlist entry is stale and must go, so the lists only shrink). Either failure prints
the current list. After moving code, see the numbers and rewrite the lists with

    python tests/test_layering.py --print     # numbers, import cycles, current lists
    python tests/test_layering.py --write     # rewrite the three lists below in place
"""
from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "fnx"

# -- the layers ------------------------------------------------------------------------------
# Lowest first. A module belongs to the layer of its longest prefix in LAYER_OF.
LAYERS = ("core", "interpreters", "lax", "backends", "api", "libraries", "root")
LAYER_OF = {
    # core: arrays, the IR, primitives, traces, the backend seam, dtypes, pytrees, config
    "fnx.core": "core",
    "fnx.errors": "core",
    "fnx._config": "core",
    "fnx.tree_util": "core",
    "fnx._version": "core",
    # interpreters: jvp, partial evaluation and transpose (vjp), batching (vmap), the eager
    # tape, custom rules. These modules also hold the public entry points of their
    # transformation (grad, vmap, custom_jvp), which only call down into the interpreter.
    "fnx.transforms": "interpreters",
    "fnx.transforms.jvp": "interpreters",
    "fnx.transforms.vjp": "interpreters",
    "fnx.transforms.vmap": "interpreters",
    "fnx.transforms.tape": "interpreters",
    "fnx.transforms.custom": "interpreters",
    # lax: the primitives and their rules
    "fnx.lax": "lax",
    # backends: the NumPy backend, CUDA kernels
    "fnx.backends": "backends",
    "fnx.kernels": "backends",
    # public API: jit (picks a backend), jacobians, JAX's small top-level modules
    "fnx.transforms.jit": "api",
    "fnx.transforms.pmap": "api",
    "fnx.transforms.jacobian": "api",
    "fnx.transforms.checkify": "api",
    "fnx._api": "api",
    "fnx.dtypes": "api",
    "fnx.tree": "api",
    "fnx.sharding": "api",
    "fnx.extend": "api",
    "fnx.custom_derivatives": "api",
    "fnx.ad_checkpoint": "api",
    "fnx.custom_batching": "api",
    "fnx.typing": "api",
    "fnx.implicit": "api",
    "fnx.experimental": "api",
    # libraries over the public API
    "fnx.numpy": "libraries",
    "fnx.nn": "libraries",
    # ONNX export (a backend that builds models) and import (handlers over fnx.numpy)
    "fnx.onnx": "libraries",
    "fnx.optim": "libraries",
    "fnx.random": "libraries",
    "fnx.ops": "libraries",
    "fnx.flatten_util": "libraries",
    "fnx.scipy": "libraries",
    "fnx.serialization": "libraries",
    "fnx.datasets": "libraries",
    "fnx.distributed": "libraries",
    "fnx.experimental.multihost_utils": "libraries",  # JAX's name, over fnx.distributed
    "fnx.experimental.ode": "libraries",              # odeint, over fnx.numpy
    "fnx.experimental.jet": "libraries",              # jet, over fnx.numpy
    "fnx.testing": "libraries",
    "fnx.test_util": "libraries",
    "fnx.debug": "libraries",
    "fnx.image": "libraries",
    "fnx.example_libraries": "libraries",
    # the package root gathers everything (``import fnx``), and the demo (``python -m fnx``)
    "fnx": "root",
    "fnx.__main__": "root",
}

# -- allowlists (today's violations; they may only shrink) -----------------------------------
def _lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


# "importer -> imported", one per line, sorted.
UPWARD_EDGES = _lines("""
""")

# "user -> package.module.private_name", sorted.
PRIVATE_CROSSINGS = _lines("""
""")

# "primitive backend module_that_registers_it", sorted.
FOREIGN_LOWERINGS = _lines("""
""")


# -- the import graph ------------------------------------------------------------------------
def module_files(root=PKG):
    """``{module name: path}`` of every module of the package at ``root``."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def layer(mod):
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        found = LAYER_OF.get(".".join(parts[:n]))
        if found is not None:
            return found
    raise AssertionError(f"module {mod} has no layer: add it to LAYER_OF in {__file__}")


def package(mod, mods):
    """The top-level package a module belongs to (``fnx.lax`` for ``fnx.lax.ops``,
    ``fnx.scipy`` for ``fnx.scipy.stats.kde``); ``fnx`` for the modules directly in fnx/."""
    parts = mod.split(".")
    if len(parts) == 1:
        return "fnx"
    if len(parts) == 2 and mods[mod].name != "__init__.py":
        return "fnx"
    return ".".join(parts[:2])


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _walk(tree):
    """``(node, local)`` for every node; ``local``: inside a function (runs when called)."""
    todo = [(tree, False)]
    while todo:
        node, local = todo.pop()
        yield node, local
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))


class _Visitor:
    """The imports and private-name uses of one module."""

    def __init__(self, mod, mods):
        self.mod, self.mods = mod, mods
        self.is_pkg = mods[mod].name == "__init__.py"
        self.edges = set()       # modules imported
        self.top_edges = set()   # those imported at import time (not inside a function)
        self.private = set()     # "mod.name" private names of other packages used
        self.aliases = {}        # local name -> module it is bound to

    def _base(self, node):
        if not node.level:
            return node.module
        parts = self.mod.split(".")
        if not self.is_pkg:
            parts = parts[:-1]
        if node.level > 1:
            parts = parts[:len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def _crosses(self, target):
        return package(target, self.mods) != package(self.mod, self.mods)

    def _use_module(self, target, local):
        self.edges.add(target)
        if not local:
            self.top_edges.add(target)
        # a private module of another package (fnx.lax._rules from fnx.numpy); the private
        # modules directly in fnx/ (_config, _api) are the root package's, shared by all
        pkg = package(target, self.mods)
        if pkg != "fnx" and self._crosses(target):
            if any(_private(p) for p in target[len(pkg) + 1:].split(".")):
                self.private.add(target)

    def _use_name(self, target, name):
        if _private(name) and self._crosses(target):
            self.private.add(f"{target}.{name}")

    def imports(self, tree):
        for node, local in _walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] != "fnx":
                        continue
                    target = a.name
                    while target not in self.mods:
                        target = target.rpartition(".")[0]
                    self._use_module(target, local)
                    if a.asname:
                        self.aliases[a.asname] = target
                    else:
                        self.aliases["fnx"] = "fnx"
            elif isinstance(node, ast.ImportFrom):
                base = self._base(node)
                if base is None or base.split(".")[0] != "fnx" or base not in self.mods:
                    continue
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    if sub in self.mods:
                        self._use_module(sub, local)
                        self.aliases[a.asname or a.name] = sub
                    else:
                        self._use_module(base, local)
                        if a.name != "*":
                            self._use_name(base, a.name)

    def _resolve(self, node):
        """The module an expression names (``lax``, ``fnx.lax.ops``), or None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            if base is not None and f"{base}.{node.attr}" in self.mods:
                return f"{base}.{node.attr}"
        return None

    def attributes(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                base = self._resolve(node.value)
                if base is not None and f"{base}.{node.attr}" not in self.mods:
                    self._use_name(base, node.attr)


def import_graph(root=PKG, local=True):
    """``(graph, private)``: ``graph[m]`` is the set of fnx modules ``m`` imports anywhere in
    its source (only at module level with ``local=False``); ``private`` the set of
    ``"user -> module.name"`` private-name crossings."""
    mods = module_files(root)
    graph, private = {}, set()
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        v = _Visitor(mod, mods)
        v.imports(tree)
        v.attributes(tree)
        edges = v.edges if local else v.top_edges
        edges.discard(mod)
        graph[mod] = edges
        private.update(f"{mod} -> {name}" for name in v.private)
    return graph, private


def strongly_connected(graph):
    """Tarjan's strongly connected components with more than one module, largest first."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # iterative, to stay clear of the recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


@functools.lru_cache(maxsize=None)
def _current_graph():
    return import_graph()


def upward_edges(graph):
    rank = {name: i for i, name in enumerate(LAYERS)}
    return {f"{m} -> {t}" for m, ts in graph.items() for t in ts
            if rank[layer(t)] > rank[layer(m)]}


# -- lowerings -------------------------------------------------------------------------------
# Where each lowering was registered is only known while fnx is imported, so a fresh
# interpreter imports it with ``Primitive.lowerings`` replaced by a dict that records the
# module registering each entry (``defining_module``: the module whose import ran the
# registration, as ``Primitive.module`` is the module whose import created the primitive).
_PROBE = r"""
import importlib.abc, importlib.machinery, json, sys

def patch(mod):
    site = mod.defining_module

    class Recording(dict):
        def __init__(self):
            super().__init__()
            self.sites = {}

        def __setitem__(self, key, value):
            self.sites[key] = site(3)
            super().__setitem__(key, value)

        def update(self, *args, **kw):
            for k, v in dict(*args, **kw).items():
                self.sites[k] = site(3)
                super().__setitem__(k, v)

    init = mod.Primitive.__init__

    def __init__(self, *args, **kw):
        init(self, *args, **kw)
        self.lowerings = Recording()
    mod.Primitive.__init__ = __init__


class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "fnx.core.primitive":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Hook())
import fnx
from fnx.core import primitive
out = {}
for name in sorted(primitive.BUILTIN):
    prim = primitive.REGISTRY[name]
    sites = getattr(prim.lowerings, "sites", {})
    out[name] = [prim.module, {b: sites.get(b) for b in prim.lowerings}]
print(json.dumps(out))
"""


@functools.lru_cache(maxsize=None)
def lowering_sites():
    """``{primitive: [defining module, {backend: registering module}]}`` of the built-in
    primitives, from a fresh interpreter."""
    import json
    import os
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PKG.parent), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         env=env, cwd=str(PKG.parent), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def foreign_lowerings(sites=None):
    """``"prim backend module"`` for each built-in primitive's lowering registered in a module
    other than the one that defines the primitive."""
    sites = lowering_sites() if sites is None else sites
    return {f"{name} {backend} {where}" for name, (home, rules) in sites.items()
            for backend, where in rules.items() if where != home}


# -- the tests -------------------------------------------------------------------------------
def _block(name, found):
    return f'{name} = _lines("""\n' + "".join(f"{x}\n" for x in sorted(found)) + '""")'


def _diff(found, allowed, name, what):
    new = sorted(set(found) - set(allowed))
    if new:
        print("The current list, to paste into " + Path(__file__).name + ":\n"
              + _block(name, found))
    assert not new, (f"{len(new)} new {what} (fix them; if one cannot be avoided, add it to "
                     f"{name} in {Path(__file__).name}, printed above):\n  " + "\n  ".join(new))


def _stale(found, allowed, name, what):
    gone = sorted(set(allowed) - set(found))
    if gone:
        print("The current list, to paste into " + Path(__file__).name + ":\n"
              + _block(name, found))
    assert not gone, (f"{len(gone)} {what} in {name} no longer exist: remove them (the list "
                      "is printed above; `python tests/test_layering.py --write` rewrites all "
                      "three lists):\n  " + "\n  ".join(gone))


def test_every_module_has_a_layer():
    for mod in module_files():
        layer(mod)


def test_no_new_upward_imports():
    graph, _ = _current_graph()
    _diff(upward_edges(graph), UPWARD_EDGES, "UPWARD_EDGES",
          "imports from a lower layer of a higher one")


def test_upward_import_allowlist_is_not_stale():
    graph, _ = _current_graph()
    _stale(upward_edges(graph), UPWARD_EDGES, "UPWARD_EDGES", "upward imports")


def test_no_new_private_names_across_packages():
    _, private = _current_graph()
    _diff(private, PRIVATE_CROSSINGS, "PRIVATE_CROSSINGS",
          "private names used across packages")


def test_private_name_allowlist_is_not_stale():
    _, private = _current_graph()
    _stale(private, PRIVATE_CROSSINGS, "PRIVATE_CROSSINGS", "private-name crossings")


def test_no_new_lowerings_outside_their_primitive():
    _diff(foreign_lowerings(), FOREIGN_LOWERINGS, "FOREIGN_LOWERINGS",
          "lowerings registered outside the module that defines their primitive")


def test_foreign_lowering_allowlist_is_not_stale():
    _stale(foreign_lowerings(), FOREIGN_LOWERINGS, "FOREIGN_LOWERINGS", "foreign lowerings")


def test_the_checker_sees_function_local_imports_and_private_uses(tmp_path):
    """The checker itself: function-local and relative imports are edges, a package import
    is an edge to its ``__init__``, and private names are caught three ways."""
    root = tmp_path / "fnx"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "__init__.py").write_text("")
    (root / "a" / "__init__.py").write_text("")
    (root / "a" / "_priv.py").write_text("x = 1\n")
    (root / "a" / "m.py").write_text("def _h(): pass\n")
    (root / "b" / "__init__.py").write_text("")
    (root / "b" / "n.py").write_text(
        "def f():\n"
        "    from ..a import m\n"
        "    from ..a.m import _h\n"
        "    from .. import a\n"
        "    return m._h, a\n"
        "from ..a._priv import x\n")
    graph, private = import_graph(root)
    assert graph["fnx.b.n"] == {"fnx.a.m", "fnx.a", "fnx.a._priv"}
    assert private == {"fnx.b.n -> fnx.a.m._h", "fnx.b.n -> fnx.a._priv"}
    assert strongly_connected({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [
        ["x", "y", "z"]]


def test_primitive_module_is_the_module_that_defines_it(tmp_path, monkeypatch):
    """``Primitive.module``: the module whose import made the primitive, also through a rule
    factory in another module; a primitive made at run time names its creator's module."""
    from fnx.core import primitive

    (tmp_path / "layering_factory.py").write_text(
        "from fnx.core.primitive import Primitive\n"
        "def make(name):\n"
        "    return Primitive(name, shape_rule=None, impl=None)\n")
    (tmp_path / "layering_family.py").write_text(
        "from layering_factory import make\n"
        "probe_p = make('layering_probe_a')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import layering_family
        assert layering_family.probe_p.module == "layering_family"
        late = __import__("layering_factory").make("layering_probe_b")
        assert late.module == "layering_factory"
        here = primitive.Primitive("layering_probe_c", shape_rule=None, impl=None)
        assert here.module == __name__
    finally:
        for name in ("layering_probe_a", "layering_probe_b", "layering_probe_c"):
            primitive.REGISTRY.pop(name, None)
        for mod in ("layering_family", "layering_factory"):
            sys.modules.pop(mod, None)


# -- printing the current state --------------------------------------------------------------
def report(lowerings=True):
    """The numbers, the import cycles and the three allowlists of the current tree."""
    graph, private = import_graph()
    sccs = strongly_connected(graph)
    up = upward_edges(graph)
    top = import_graph(local=False)[0]
    lines = [f"# modules: {len(graph)}, import edges: {sum(map(len, graph.values()))} "
             f"({sum(map(len, top.values()))} at module level)",
             f"# import cycles (strongly connected components), module-level imports only: "
             f"{[len(c) for c in strongly_connected(top)] or 'none'}",
             f"# import cycles counting function-local imports: "
             f"{[len(c) for c in sccs] or 'none'}"]
    lines += ["#   " + " ".join(c) for c in sccs]
    lines += [f"# upward edges: {len(up)}", _block("UPWARD_EDGES", up), "",
              f"# private crossings: {len(private)}", _block("PRIVATE_CROSSINGS", private)]
    if lowerings:
        foreign = foreign_lowerings()
        lines += ["", f"# foreign lowerings: {len(foreign)}",
                  _block("FOREIGN_LOWERINGS", foreign)]
    return "\n".join(lines)


def write_allowlists():
    """Rewrite the three allowlists in this file with the current tree's."""
    import re

    graph, private = import_graph()
    path = Path(__file__)
    text = path.read_text(encoding="utf-8")
    for name, found in (("UPWARD_EDGES", upward_edges(graph)), ("PRIVATE_CROSSINGS", private),
                        ("FOREIGN_LOWERINGS", foreign_lowerings())):
        text, n = re.subn(rf'^{name} = _lines\("""\n.*?"""\)', lambda m: _block(name, found),
                          text, count=1, flags=re.S | re.M)
        assert n == 1, name
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--write" in args:
        write_allowlists()
    if "--print" in args or "--write" in args:
        print(report(lowerings="--no-lowerings" not in args))
    else:
        sys.exit("usage: python tests/test_layering.py --print [--no-lowerings] | --write\n"
                 "  --print: the numbers, the import cycles and the current allowlists\n"
                 "  --write: rewrite the allowlists in this file with the current ones")
