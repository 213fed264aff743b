"""The layers import one way (envs <- baselines <- agents <- scripts), without cycles, and at
module level (an import inside a function hides a cycle; none of the project's is heavy)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Every top-level script, the scripts/ and the benchmarks/ folder: the top layer, which
#: nothing imports.
SCRIPTS = ("train", "evaluate", "sweep", "deploy")
FOLDERS = ("scripts", "benchmarks")
#: Project modules that import Ray at module level: importing them inside a function defers
#: that heavy optional dependency until a sweep runs.
DEFERRED = ("agents.sweep.progress", "agents.sweep.trial")
RANK = {"envs": 0, "baselines": 1, "agents": 2, **dict.fromkeys((*SCRIPTS, *FOLDERS), 3)}
PACKAGES = ("envs", "baselines", "agents", "calibration")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    for script in SCRIPTS:
        out[script] = ROOT / f"{script}.py"
    for folder in FOLDERS:
        for f in sorted((ROOT / folder).glob("*.py")):
            out[f"{folder}.{f.stem}"] = f
    return out


def _imports(path: Path) -> set[str]:
    """Project modules a file imports (at module level or inside functions)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    top = {*PACKAGES, *SCRIPTS, *FOLDERS}
    return {n for n in names if n.split(".")[0] in top}


def _function_imports(path: Path) -> list[str]:
    """Project modules a file imports inside a function, as ``line: module``."""
    out = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found = _imports_of(node)
                    out += [f"{node.lineno}: {n}" for n in sorted(found) if n not in DEFERRED]
    return out


def _imports_of(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    elif node.module and node.level == 0:
        names = {node.module}
    else:
        names = set()
    return {n for n in names if n.split(".")[0] in {*PACKAGES, *SCRIPTS, *FOLDERS}}


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    top = module.split(".")[0]
    for name in _imports(MODULES[module]):
        target = name.split(".")[0]
        if top == "calibration":
            assert target in ("calibration", "envs"), f"{module} imports {name}"
            continue
        assert target != "calibration", f"{module} (run time) imports the offline {name}"
        assert RANK[target] <= RANK[top], f"{module} imports {name}, a layer above it"
        assert RANK[target] < 3, f"{module} imports {name}: a script is no library"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_project_imports_are_at_module_level(module: str) -> None:
    assert _function_imports(MODULES[module]) == [], f"{module} imports inside a function"


def test_no_import_cycle_between_modules() -> None:
    graph = {m: {n for n in (_imports(p)) if n in MODULES and n != m} for m, p in MODULES.items()}
    # also edges to a package's module through "from pkg.mod import name" (a name that is
    # not itself a module: "from pkg.sub.mod import f" is an edge to pkg.sub.mod, not pkg.sub)
    for m, p in MODULES.items():
        for n in _imports(p):
            parent = n.rsplit(".", 1)[0]
            if n not in MODULES and parent in MODULES and parent != m and parent.split(".")[0] != n:
                graph[m].add(parent)
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if n.count(".") == 0 and n in PACKAGES:
                continue  # a package's __init__ re-exports; its modules carry the edges
            if state.get(n) == 1:
                raise AssertionError(f"import cycle: {' -> '.join([*path, m, n])}")
            if state.get(n) is None:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if state.get(m) is None:
            visit(m, [])


def test_a_layer_violation_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from agents.rollout import rollout\n")
    assert "agents.rollout" in _imports(bad)
    assert _function_imports(bad) == ["2: agents.rollout"]


def _area(module: str) -> str:
    """The part of ``agents`` a module belongs to (``agents.view.codec``: ``agents.view``;
    ``agents.trainer``: ``agents.trainer``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_the_configuration_imports_no_other_agents_module() -> None:
    """agents/config is the schema at the bottom of agents: it reads nothing else of agents."""
    found = [
        f"{m} imports {n}"
        for m, p in MODULES.items()
        if m.startswith("agents.config")
        for n in _imports(p)
        if (n.startswith("agents.") and not n.startswith("agents.config")) or n == "agents"
    ]
    assert found == []


def _area_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for m, p in MODULES.items():
        if not m.startswith("agents."):
            continue
        for n in _imports(p):
            if n.startswith("agents.") and _area(n) != _area(m):
                graph.setdefault(_area(m), set()).add(_area(n))
    return graph


def test_no_import_loop_between_the_parts_of_agents() -> None:
    graph = _area_graph()
    state: dict[str, int] = {}

    def visit(a: str, path: list[str]) -> None:
        state[a] = 1
        for b in sorted(graph.get(a, ())):
            if state.get(b) == 1:
                raise AssertionError(f"import loop: {' -> '.join([*path, a, b])}")
            if state.get(b) is None:
                visit(b, [*path, a])
        state[a] = 2

    for a in sorted(graph):
        if state.get(a) is None:
            visit(a, [])
