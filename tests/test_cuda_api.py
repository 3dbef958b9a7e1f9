"""Every cupy function, attribute and keyword argument rooflab uses exists in the REAL cupy.

The CPU stand-in (tests/fake_gpu.py) offers what numpy offers, so a call cupy does not have (issue 25:
``cupy.random.default_rng(seed).permutation``, which cupy's Generator lacks) passes every test on the
CPU and fails on the first GPU. This test reads rooflab's and the scripts' source (AST), follows the
names bound to cupy (``import cupy as cp``, ``cp = cupy()``, ``rng = cp.random.default_rng(...)``,
``from cupy.cuda import nvrtc``), and looks every attribute chain up in the installed cupy (it imports
without a GPU), with the keyword arguments of each call checked against the real signature where
cupy exposes one (Python functions, and Cython ones through their docstring's first line).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

cupy = pytest.importorskip("cupy")

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "rooflab").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
MODULE_GETTERS = {"cupy", "cp", "_cp"}  # zero-argument helpers that return the cupy module
GENERATOR = ("cupy", "random", "Generator")


class Uses(ast.NodeVisitor):
    """(path, keywords, where) of every attribute chain rooted at cupy, per function scope."""

    def __init__(self, fname):
        self.fname, self.scopes, self.found = fname, [{}], []

    def bound(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def resolve(self, node):
        if isinstance(node, ast.Name):
            return self.bound(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return base + (node.attr,) if base else None
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in MODULE_GETTERS and not node.args and not node.keywords and self.bound(name) is None:
                return ("cupy",)
            path = self.resolve(f)
            if path and path[-2:] == ("random", "default_rng"):
                return GENERATOR
        return None

    def visit_Import(self, node):
        for a in node.names:
            if a.name.split(".")[0] in ("cupy", "cupyx"):
                self.scopes[-1][a.asname or a.name.split(".")[0]] = tuple((a.asname and a.name or a.name).split("."))[
                    : None if a.asname else 1
                ]

    def visit_ImportFrom(self, node):
        if node.module and node.module.split(".")[0] in ("cupy", "cupyx"):
            for a in node.names:
                self.scopes[-1][a.asname or a.name] = tuple(node.module.split(".")) + (a.name,)
                self.found.append((tuple(node.module.split(".")) + (a.name,), (), f"{self.fname}:{node.lineno}"))

    def visit_FunctionDef(self, node):
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_Assign(self, node):
        self.generic_visit(node)
        path = self.resolve(node.value)
        for t in node.targets:
            if isinstance(t, ast.Name):
                if path:
                    self.scopes[-1][t.id] = path
                else:
                    self.scopes[-1].pop(t.id, None)

    def visit_Attribute(self, node):
        path = self.resolve(node)
        if path and not isinstance(getattr(node, "_parent_call", None), ast.Call):
            self.found.append((path, (), f"{self.fname}:{node.lineno}"))
        self.generic_visit(node)

    def visit_Call(self, node):
        path = self.resolve(node.func)
        if path and len(path) > 1:
            kws = tuple(k.arg for k in node.keywords if k.arg)
            self.found.append((path, kws, f"{self.fname}:{node.lineno}"))
        self.generic_visit(node)


def uses():
    out = []
    for f in SOURCES:
        v = Uses(str(f.relative_to(ROOT)))
        v.visit(ast.parse(f.read_text()))
        out += [u for u in v.found if len(u[0]) > 1]
    return out


def lookup(path):
    obj = {"cupy": cupy, "cupyx": pytest.importorskip("cupyx")}[path[0]]
    for i, name in enumerate(path[1:], 1):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            raise LookupError(f"{'.'.join(path[: i + 1])} does not exist in cupy {cupy.__version__}") from None
    return obj


_DOC_SIG = re.compile(r"^[\w.]*\(([^)]*)\)")


def parameters(obj):
    """Names of the parameters ``obj`` takes, or None when they cannot be read (or **kwargs)."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        ps = inspect.signature(target).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in ps):
            return None
        return {p.name for p in ps}
    except (TypeError, ValueError):
        m = _DOC_SIG.match((getattr(target, "__doc__", None) or "").strip())
        if not m or "**" in m.group(1):
            return None
        return {p.split("=")[0].strip(" *") for p in m.group(1).split(",") if p.strip()}


def test_the_scan_sees_rooflabs_cupy_calls():
    """The scanner itself: it must see calls we know are there (else the test below proves nothing)."""
    paths = {u[0] for u in uses()}
    assert ("cupy", "cuda", "runtime", "getDeviceCount") in paths
    assert ("cupy", "random", "Generator", "standard_normal") in paths
    assert ("cupy", "RawModule") in paths and ("cupy", "asarray") in paths


def test_a_reintroduced_permutation_is_caught(tmp_path, monkeypatch):
    """The fault of issue 25, written back into a copy of knobs.py, fails the check."""
    bad = (
        (ROOT / "rooflab/cuda/knobs.py")
        .read_text()
        .replace(
            "xp.asarray(np.random.default_rng(seed).permutation(1024)", "(xp.random.default_rng(seed).permutation(1024)"
        )
    )
    assert "xp.random.default_rng(seed).permutation" in bad
    v = Uses("knobs.py")
    v.visit(ast.parse(bad))
    with pytest.raises(LookupError, match="Generator.permutation"):
        for path, _, _ in v.found:
            lookup(path)


def test_every_cupy_call_exists_in_the_real_cupy():
    missing = []
    for path, kws, where in uses():
        try:
            obj = lookup(path)
        except LookupError as e:
            missing.append(f"{where}: {e}")
            continue
        params = parameters(obj) if kws and callable(obj) else None
        if params is not None:
            unknown = [k for k in kws if k not in params]
            if unknown:
                missing.append(f"{where}: {'.'.join(path)} has no keyword {', '.join(unknown)} ({sorted(params)})")
    assert not missing, "\n".join(sorted(set(missing)))
