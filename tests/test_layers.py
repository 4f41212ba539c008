"""Imports point downward only, as the layer table in docs/architecture.md says."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "tracegrad"

# layer -> the layers it may import
ALLOWED = {
    "errors": set(),
    "core": {"errors", "core"},
    "ops": {"errors", "core", "ops"},
    "passes": {"errors", "core", "ops", "passes"},
    "transforms": {"errors", "core", "ops", "passes", "transforms"},
    "backends": {"errors", "core", "ops", "passes", "backends"},
    "api": {"errors", "core", "ops", "passes", "transforms", "backends", "api"},
    "cli": {"errors", "public", "cli"},
    "dask": {"errors", "core", "public", "dask"},  # the public API, and core's tree
    "public": {"errors", "core", "ops", "passes", "transforms", "backends", "api", "cli",
               "public"},
}

API_MODULES = {"function", "numpy", "nn", "eager", "autodiff", "derivatives", "extend",
               "optimizers", "random", "scipy", "tree"}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts == ["tracegrad"]:
        return "public"
    head = parts[1]
    if head in ("core", "ops", "passes", "transforms", "backends", "errors"):
        return head
    if head in ("cli", "__main__"):
        return "cli"
    if head == "dask":
        return "dask"
    if head in API_MODULES:
        return "api"
    raise AssertionError(f"module {module} is in no layer: add it to the table")


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imported(path: pathlib.Path, module: str):
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:
                candidate = f"{name}.{alias.name}"
                rel = pathlib.Path(*candidate.split(".")[1:])
                if (ROOT / rel).is_dir() or (ROOT / rel).with_suffix(".py").is_file():
                    yield candidate
                else:
                    yield name


@pytest.mark.parametrize("module,path", list(modules()), ids=lambda x: str(x))
def test_module_imports_respect_layers(module, path):
    mine = layer_of(module)
    for name in imported(path, module):
        if not (name == "tracegrad" or name.startswith("tracegrad.")):
            continue
        target = layer_of(name)
        if mine == "cli" and target not in ALLOWED["cli"]:
            if name in ("tracegrad", "tracegrad.numpy", "tracegrad.nn", "tracegrad.errors"):
                continue
        assert target in ALLOWED[mine] or (mine == "cli" and target == "public"), (
            f"{module} ({mine}) imports {name} ({target})"
        )


def test_numba_is_imported_only_by_the_numba_backend():
    for module, path in modules():
        if module.startswith("tracegrad.backends.numba"):
            continue
        for name in imported(path, module):
            assert not name.startswith("numba"), f"{module} imports {name}"


# -- import circles ------------------------------------------------------------------------

# The circles of modules that import each other (at any level: a function-local import is
# an edge too) that exist today; each is to shrink, none may grow, no new one may appear.
KNOWN_CIRCLES = [
    {"tracegrad.core.ir", "tracegrad.core.op", "tracegrad.core.parser", "tracegrad.core.printer",
     "tracegrad.core.serialize", "tracegrad.core.variables", "tracegrad.core.verify"},
    {"tracegrad.ops._batching", "tracegrad.ops._families", "tracegrad.ops.elementwise",
     "tracegrad.ops.indexing", "tracegrad.ops.reductions", "tracegrad.ops.shape_ops"},
    {"tracegrad.passes.diagonal", "tracegrad.passes.simplify"},
    {"tracegrad.numpy._core", "tracegrad.numpy._creation", "tracegrad.numpy._eager",
     "tracegrad.numpy._shape", "tracegrad.numpy._ufuncs"},
    {"tracegrad.numpy", "tracegrad.numpy._dispatch", "tracegrad.numpy._methods"},
    {"tracegrad.backends.numba", "tracegrad.backends.numba.codegen",
     "tracegrad.backends.numba.control"},
    {"tracegrad.function", "tracegrad.function._pickle"},
]


def import_graph() -> dict:
    """module -> the tracegrad modules it imports (a name inside a module counts as it)."""
    paths = dict(modules())
    graph = {}
    for module, path in paths.items():
        targets = set()
        for name in imported(path, module):
            while name and name not in paths:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def circles(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_new_import_circles():
    for circle in circles(import_graph()):
        assert any(circle <= known for known in KNOWN_CIRCLES), (
            f"modules that import each other: {sorted(circle)}; a new or moved module must "
            "not join a circle (pass what it needs as an argument, or move the shared part "
            "down into a module both import)")


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c"}]
