"""The package's layer rules that a tool can check (see docs/architecture.rst).

The import contracts themselves are import-linter's (``make lint`` runs
``lint-imports``); these tests check what those contracts do not say: no
import cycle at all, forward hooks attached, torch's generators seeded and
sample shapes checked in one module each, and no import of another
subpackage's private module (the kernels' freedom from torch is
checked in tests/kernels).
"""

import ast
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp")

PACKAGE = Path(__file__).resolve().parents[1] / "sksign"


def _strongly_connected(graph):
    """Tarjan's strongly connected components of ``{node: set(successors)}``."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _cycles(graph):
    return [
        sorted(c)
        for c in _strongly_connected(graph)
        if len(c) > 1 or next(iter(c)) in graph.get(next(iter(c)), ())
    ]


@pytest.fixture(scope="module")
def import_graph():
    return grimp.build_graph("sksign")


def test_tarjan_finds_a_cycle():
    """Check the cycle finder itself on a graph with and without a cycle."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_between_modules(import_graph):
    """Check that no module of sksign imports itself through others.

    Function-level imports count too: a cycle hidden inside a function is
    still a cycle.
    """
    graph = {
        m: import_graph.find_modules_directly_imported_by(m)
        for m in import_graph.modules
    }
    assert _cycles(graph) == []


def test_no_import_cycle_between_subpackages(import_graph):
    """Check that the subpackages (nn, kernels, estimators, ...) form no cycle."""

    def unit(module):
        parts = module.split(".")
        return ".".join(parts[:2])

    graph = {}
    for m in import_graph.modules:
        for target in import_graph.find_modules_directly_imported_by(m):
            if unit(target) != unit(m):
                graph.setdefault(unit(m), set()).add(unit(target))
    assert _cycles(graph) == []


#: The subpackages of sksign.nn, in the order they may import each other:
#: each only from those before it (and the shared sksign.nn._validation).
NN_ORDER = (
    "sksign.nn.activations",
    "sksign.nn.hooks",
    "sksign.nn.layers",
    "sksign.nn.architectures",
)


def test_nn_subpackages_import_in_one_order(import_graph):
    """Check sksign.nn's subpackages import only the ones before them in
    NN_ORDER: activations < hooks < layers < architectures (the modules
    interventions and summary, over any net, stand above them all)."""

    def unit(module):
        return ".".join(module.split(".")[:3])

    found = []
    for importer in sorted(import_graph.modules):
        if unit(importer) not in NN_ORDER:
            continue
        allowed = NN_ORDER[: NN_ORDER.index(unit(importer)) + 1]
        for imported in sorted(
            import_graph.find_modules_directly_imported_by(importer)
        ):
            if imported.startswith("sksign.nn") and imported != "sksign.nn._validation":
                if unit(imported) not in allowed:
                    found.append(f"{importer} -> {imported}")
    assert not found, "\n".join(found)


def _lines_where(path, match):
    """Line numbers of the AST nodes of `path` for which ``match(node)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node.lineno for node in ast.walk(tree) if match(node)]


def _modules_where(match):
    """``{module path under sksign/: [line, ...]}`` of the modules with a match."""
    return {
        p.relative_to(PACKAGE).as_posix(): lines
        for p in sorted(PACKAGE.rglob("*.py"))
        if (lines := _lines_where(p, match))
    }


def _is_hook_registration(node):
    return isinstance(node, ast.Attribute) and node.attr in (
        "register_forward_hook",
        "register_forward_pre_hook",
    )


def test_forward_hooks_are_attached_inside_sksign_nn_only():
    """Check that every forward hook of the library goes through sksign.nn."""
    found = _modules_where(_is_hook_registration)
    assert [m for m in found if not m.startswith("nn/")] == []
    assert len(found) == 1, found


def _is_thread_pool(node):
    name = getattr(node, "id", getattr(node, "attr", None))
    return isinstance(node, ast.Name | ast.Attribute) and name in (
        "ThreadPoolExecutor",
        "ThreadPool",
        "register_at_fork",
    )


def test_worker_threads_come_from_one_fork_safe_pool():
    """Check that sksign/_threads.py is the one module that makes thread
    pools (and clears them in a forked child): a pool cached elsewhere would
    hang a forked child that waits on threads it does not have."""
    found = _modules_where(_is_thread_pool)
    assert list(found) == ["_threads.py"], found


def _is_matrix_product(node):
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)) or (
        isinstance(node, ast.Attribute) and node.attr in ("matmul", "dot", "einsum")
    )


def test_packed_runtime_products_go_through_blas_product():
    """Check that the packed runtime's BLAS products are made in one place,
    ``blas_product``, which splits them over the net's own threads in blocks
    set by the shape (BLAS's own threads spin after a call, and their blocks
    follow the thread count): a product written elsewhere would bring both
    back. The converters and the bit-map geometry helpers run at pack or
    load time, not per call, and are left out."""
    at_load = ("deploy/_convert", "deploy/_maps.py")
    found = {
        m: lines
        for m, lines in _modules_where(_is_matrix_product).items()
        if m.startswith("deploy/") and not m.startswith(at_load)
    }
    assert list(found) == ["deploy/_ops/_common.py"], found
    assert len(found["deploy/_ops/_common.py"]) == 2, found  # np.matmul, twice


#: numpy's allocators, which a call's op takes from its net's buffer pool instead
ALLOCATORS = ("empty", "zeros", "empty_like", "zeros_like", "ascontiguousarray")


def _allocations_in_runs(path):
    """Lines of ``np.<allocator>(...)`` inside the ``run`` functions of a module."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and node.name == "run":
            lines += [
                call.lineno
                for call in ast.walk(node)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "np"
                and call.func.attr in ALLOCATORS
            ]
    return lines


def test_packed_ops_take_their_outputs_from_the_buffer_pool():
    """Check that no op's per-call ``run`` allocates with numpy directly: its
    arrays come from ``sksign.deploy._buffers`` (fresh megabytes each call
    had cost an image net half its time in page faults)."""
    found = {
        p.name: lines
        for p in sorted((PACKAGE / "deploy" / "_ops").glob("*.py"))
        if (lines := _allocations_in_runs(p))
    }
    assert not found, found


#: the longest a module of sksign may be, in lines
MAX_LINES = 600


def test_no_module_is_longer_than_600_lines():
    """Check every module of sksign has at most 600 lines (split by job)."""
    too_long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        n_lines = len(path.read_text(encoding="utf-8").splitlines())
        if n_lines > MAX_LINES:
            too_long[name] = n_lines
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"


def _is_training_assignment(node):
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == "training" for t in node.targets
    )


def test_train_modes_are_saved_and_restored_in_one_place():
    """Check that ``.training`` flags are set back only by
    sksign.nn.temporary_mode (sksign/nn/hooks/_capture.py)."""
    found = _modules_where(_is_training_assignment)
    assert list(found) == ["nn/hooks/_capture.py"], found


def _is_rng_seeding(node):
    return isinstance(node, ast.Attribute) and node.attr in (
        "manual_seed",
        "manual_seed_all",
        "fork_rng",
        "set_rng_state",
    )


#: The modules that seed torch's generators, and why each may.
RNG_SEEDING = {
    # every random stream of a fit, derived from random_state
    "estimators/_rng.py": "the fits' streams",
    # a private torch.Generator per repeat, seeded by the scorer's own
    # random_state: no fit's stream, and never torch's global generator
    "metrics/_interventions.py": "a scorer's corruption",
    # a plain torch training loop of a paper's figure, outside the estimators
    "_report/htaf_paper.py": "a report's own net",
}


def test_fit_streams_are_seeded_in_one_module():
    """Check that sksign/estimators/_rng.py is the one module of the estimators
    that seeds torch's generators (``manual_seed``, ``fork_rng``, ...), so every
    random stream of a fit is derived from ``random_state`` in one place, and
    that the other modules that seed one are the known ones (RNG_SEEDING)."""
    found = _modules_where(_is_rng_seeding)
    estimators = [m for m in found if m.startswith("estimators/")]
    assert estimators == ["estimators/_rng.py"], found
    assert sorted(found) == sorted(RNG_SEEDING), found


def _is_sample_shape_message(node):
    if not isinstance(node, ast.JoinedStr):
        return False
    text = "".join(
        v.value for v in node.values if isinstance(v, ast.Constant) and v.value
    )
    return " of shape " in text and "fitted on " in text


def test_the_sample_shape_rule_is_written_once():
    """Check that the "X has ... of shape ..., but ... was fitted on ..." check
    is sksign/_shapes.py's alone: the nets, the transformers and the packed
    estimators split and check samples through it, with one message."""
    found = _modules_where(_is_sample_shape_message)
    assert list(found) == ["_shapes.py"], found


def _subpackage(module):
    """``sksign.x`` of a module ``sksign.x...`` (the root modules are their own)."""
    return ".".join(module.split(".")[:2])


def test_no_module_imports_another_subpackages_private_module(import_graph):
    """A subpackage is used through its package (``sksign.kernels``), never
    through a private module of it (``sksign.kernels._popcount``)."""
    found = []
    for importer in sorted(import_graph.modules):
        if not importer.startswith("sksign."):
            continue
        for imported in sorted(
            import_graph.find_modules_directly_imported_by(importer)
        ):
            parts = imported.split(".")
            if parts[0] != "sksign" or len(parts) < 3:
                continue
            private = any(p.startswith("_") for p in parts[2:])
            if private and _subpackage(imported) != _subpackage(importer):
                found.append(f"{importer} -> {imported}")
    assert not found, "\n".join(found)
