"""The broker's modules import each other without a circle (issue 38).

The layers contract in pyproject.toml keeps the named layers in order, but modules outside it,
or siblings of one layer, could still import each other both ways; and an import under
``TYPE_CHECKING`` is an import too (it made the circle server <-> metrics <-> kafka.apis <->
kafka.listener that issue 38 broke). This builds the import graph with grimp (what
import-linter uses), type-checking imports included, and fails naming every circle.
"""

from __future__ import annotations

import grimp


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's components of the module graph that hold more than one module (circles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph.find_modules_directly_imported_by(m)):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            comp = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                comp.append(n)
                if n == m:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_the_broker_has_no_import_circle() -> None:
    graph = grimp.build_graph("jbod_broker", exclude_type_checking_imports=False, cache_dir=None)
    assert strongly_connected(graph) == []


def test_a_circle_is_found() -> None:
    """The check itself: a circle added to the graph is reported."""
    graph = grimp.build_graph("jbod_broker", cache_dir=None)
    graph.add_import(importer="jbod_broker.storage.log", imported="jbod_broker.server")
    circles = strongly_connected(graph)
    assert any({"jbod_broker.storage.log", "jbod_broker.server"} <= set(c) for c in circles)
