"""The house's structure: no import circle among rooflab's modules, the driver's Backend in a leaf
module, the driver reaching a backend's process isolation through the backend, never by name, and
no rung picked by comparing its number (roles are attributes: a new rung is one entry).

The import graph is read from the source (every ``import`` and ``from ... import``, function-level
ones included: a lazy import is still a dependency), one node per file of rooflab/ and kernels/
(packaged as rooflab.kernels); ~120 files parse in well under a second.

Run: python -m pytest -q tests/test_house.py
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"rooflab": ROOT / "rooflab", "rooflab.kernels": ROOT / "kernels"}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (kernels/ as rooflab.kernels)."""
    out = {}
    for pkg, base in PACKAGES.items():
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([pkg, *parts])
            if name not in out or pkg == "rooflab.kernels":
                out[name] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (anywhere in the file)."""
    graph = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name if is_pkg else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import sub` names a module where one exists, else an attribute of pkg
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
            for t in targets:
                while t and t not in modules:  # `import a.b.c` of a non-module attribute: its module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_finder_finds_a_circle_and_reads_relative_imports(tmp_path):
    """The check can fail: a made-up package whose driver imports a backend that imports it back."""
    pkg = tmp_path / "pkg"
    (pkg / "cpu").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cpu" / "__init__.py").write_text("")
    (pkg / "driver.py").write_text("def f():\n    from .cpu.backend import make\n")
    (pkg / "cpu" / "backend.py").write_text("from ..driver import Backend\n")
    (pkg / "leaf.py").write_text("import os\n")
    mods = {
        "pkg": pkg / "__init__.py",
        "pkg.cpu": pkg / "cpu" / "__init__.py",
        "pkg.driver": pkg / "driver.py",
        "pkg.cpu.backend": pkg / "cpu" / "backend.py",
        "pkg.leaf": pkg / "leaf.py",
    }
    g = import_graph(mods)
    assert g["pkg.driver"] == {"pkg.cpu.backend"} and g["pkg.cpu.backend"] == {"pkg.driver"}
    assert circles(g) == [["pkg.cpu.backend", "pkg.driver"]]


def test_no_import_circle_in_the_house():
    found = circles(import_graph(_modules()))
    assert not found, f"import circles: {found}"


def test_backend_is_a_leaf_and_the_driver_imports_no_device():
    g = import_graph(_modules())
    assert not g["rooflab.backend"], g["rooflab.backend"]
    assert "rooflab.backend" in g["rooflab.driver"]
    assert not {m for m in g["rooflab.driver"] if m.startswith(("rooflab.cpu", "rooflab.cuda", "rooflab.processes"))}


def test_the_driver_isolates_a_case_through_its_backend():
    """``processes: N`` goes to the backend's isolate hook (the CPU's runs fresh interpreters); a
    backend without one measures the case in this process."""
    from dataclasses import replace

    from rooflab.cpu.backend import cpu_backend
    from rooflab.driver import Driver, Record, Settings
    from rooflab.registry import Case

    calls = []

    def isolate(driver, case, processes):
        calls.append((driver, case.variant, processes))
        return Record(
            variant=case.variant,
            family="x",
            device="cpu",
            label="",
            threads=1,
            dtype=None,
            shape={},
            params={},
            working_set_bytes=0,
        )

    settings = Settings(budget_s=0.0, min_samples=1, probe_clock=False, max_attempts=1)
    case = Case("cpu.stream.triad", size=4096, timing={"processes": 3})
    drv = Driver(replace(cpu_backend(probe=False), isolate=isolate), settings)
    rec = drv.run_case(case)
    assert calls == [(drv, "cpu.stream.triad", 3)] and rec.family == "x"
    rec = Driver(replace(cpu_backend(probe=False), isolate=None), settings).run_case(case)
    assert rec.status == "ok" and rec.verified and "processes" not in rec.meta
    assert cpu_backend().isolate is not None


def test_a_test_of_a_real_run_without_the_slow_mark_is_refused(tmp_path):
    """The fast loop cannot take in a test of a real `rooflab run` by mistake: collection fails."""
    import shutil
    import subprocess
    import sys

    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_unmarked.py").write_text("def test_x(quick_result):\n    pass\n")
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n\n@pytest.mark.slow\ndef test_y(quick_result):\n    pass\n"
    )
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--collect-only",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
    ]
    bad = subprocess.run([*args, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 4 and "test_unmarked.py::test_x" in bad.stderr + bad.stdout, bad.stdout + bad.stderr
    (line,) = [x for x in (bad.stderr + bad.stdout).splitlines() if "must be marked" in x]
    assert "test_unmarked.py::test_x" in line and "test_marked" not in line
    good = subprocess.run([*args, str(tmp_path / "test_marked.py")], capture_output=True, text=True, cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr


def test_ruff_is_one_version_in_ci_and_in_pre_commit():
    """CI installs the dev extra's ruff, pre-commit runs its hook's rev: the same pinned version, so a
    file formatted locally passes CI's `ruff format --check` (formatters change between versions)."""
    import re

    dev = re.search(r"^dev = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    (pin,) = re.findall(r'"(ruff\b[^"]*)"', dev)
    m = re.fullmatch(r"ruff==(\d+\.\d+\.\d+)", pin.split(";")[0].strip())
    assert m, f"pyproject's dev extra pins ruff to one version (ruff==X.Y.Z), got {pin!r}"
    hook = re.search(r"ruff-pre-commit\s*\n\s*rev:\s*v?(\S+)", (ROOT / ".pre-commit-config.yaml").read_text())
    assert hook and hook.group(1) == m.group(1), (hook and hook.group(1), m.group(1))


def test_no_rung_is_picked_by_comparing_its_number():
    """Roles of a rung (the library, the model-op rungs, the best one) are attributes of its
    variant or rung entry, so a new rung is one entry: no code orders rungs by number to pick one."""
    import re

    root = ROOT
    compare = re.compile(r"\.number\s*(>=|<=|>|<)\s*\d|\bnumber\s*(>=|<=|>|<)\s*\d")
    found = [
        f"{p.relative_to(root)}:{i}: {line.strip()}"
        for folder in ("rooflab", "scripts", "benchmarks", "kernels")
        for p in sorted((root / folder).rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if compare.search(line) and "pct" not in line
    ]
    assert found == []


def _njit_functions(tree: ast.Module) -> dict[str, bool]:
    """Name -> whether the njit function is inlined (``inline="always"``), for the module's own ones."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                call = d if isinstance(d, ast.Call) else None
                name = getattr(call.func if call else d, "id", None)
                if name == "njit":
                    out[node.name] = bool(call) and any(
                        k.arg == "inline" and getattr(k.value, "value", None) == "always" for k in call.keywords
                    )
    return out


def prange_index_passed_raw(source: str) -> list[str]:
    """Calls in a ``prange`` body that hand the loop index itself to a compiled (not inlined) njit
    function of the same module. numba types that index uint64 inside the parallel body and int64
    before it, so such a callee is compiled twice, once per signature (the depthwise conv: 27.6 s of
    cold compile, 14.0 s with ``np.int64(t)`` passed instead)."""
    tree = ast.parse(source)
    compiled = {n for n, inlined in _njit_functions(tree).items() if not inlined}
    found = []
    for loop in ast.walk(tree):
        it = loop.iter if isinstance(loop, ast.For) else None
        if not (isinstance(it, ast.Call) and getattr(it.func, "id", getattr(it.func, "attr", None)) == "prange"):
            continue
        index = getattr(loop.target, "id", None)
        for call in ast.walk(loop):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) in compiled:
                if any(isinstance(a, ast.Name) and a.id == index for a in call.args):
                    found.append(f"line {call.lineno}: {call.func.id}(..., {index}, ...)")
    return found


def test_a_prange_index_reaches_a_compiled_callee_as_int64():
    bad = """
@njit(cache=True)
def body(x, t):
    x[t] = t

@njit(inline="always")
def inlined(x, t):
    x[t] = t

@njit(parallel=True)
def outer(x):
    for t in prange(4):
        body(x, t)
        inlined(x, t)
        body(x, np.int64(t))
"""
    assert prange_index_passed_raw(bad) == ["line 13: body(..., t, ...)"]
    found = {
        str(p.relative_to(ROOT)): hits
        for p in sorted((ROOT / "kernels").rglob("*.py"))
        if (hits := prange_index_passed_raw(p.read_text()))
    }
    assert found == {}
