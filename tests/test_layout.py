"""The tree shows the architecture (issue 31; docs/architecture.md): one subpackage per
concern, read from the source alone.

- at most 10 modules at the top of traceview/;
- no flat family of modules named by a shared prefix in one package (`x.py` beside `x_y.py`,
  or three `x_*.py`): a family is a subpackage (`workflow/ablate/`, `output/export/`);
- every package's `__init__.py` has a docstring (what lives there, what it may import);
- every module of traceview sits on one floor of the layering, and imports only its own
  floor and those below: parsers -> utilities -> Trace -> analyze -> ingest -> output ->
  workflow -> entry points (cli, tui, the worker's program);
- no import cycle between packages, at any level (traceview's subpackages, and the
  subpackages and modules inside each of them).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT
from tests.test_boundaries import _in, _project_modules, cycles, import_graph

PACKAGE = ROOT / "traceview"
MAX_TOP_MODULES = 10

# The floors, bottom up: a module imports only from its own floor and the floors below.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("parsers",),
    ("traceview.errors", "traceview.printable", "traceview.timing", "traceview.versions"),
    ("traceview.trace",),
    ("traceview.analyze",),
    ("traceview.ingest",),
    ("traceview.output",),
    ("traceview.live",),
    ("traceview.workflow",),
    ("traceview.cli", "traceview.__main__", "traceview.tui", "traceview.worker"),
)
# The package __init__ is the library's front door (`traceview.load`, `traceview.Trace`,
# `traceview.read_export`): lazy re-exports, no code of its own. Importing it is importing
# what it re-exports, so it is looked through rather than given a floor.
FRONT_DOOR = "traceview"


def floor_of(module: str) -> int | None:
    for i, prefixes in enumerate(FLOORS):
        if _in(module, *prefixes):
            return i
    return None


def _through_front_door(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph with every edge to the front door replaced by the front door's own edges."""
    door = graph.get(FRONT_DOOR, set()) - {FRONT_DOOR}
    return {m: (deps - {FRONT_DOOR}) | (door if FRONT_DOOR in deps else set()) for m, deps in graph.items() if m != FRONT_DOOR}


def against_the_direction(graph: dict[str, set[str]]) -> list[str]:
    """Edges that go up a floor, and modules on no floor."""
    out = []
    for mod, deps in sorted(_through_front_door(graph).items()):
        here = floor_of(mod)
        if here is None:
            out.append(f"{mod}: on no floor (add it to FLOORS and to docs/architecture.md)")
            continue
        for dep in sorted(deps):
            there = floor_of(dep)
            if there is not None and there > here:
                out.append(f"{mod} -> {dep}: imports up, from {FLOORS[here][0]} to {FLOORS[there][0]}")
    return out


def _unit(module: str, package: str) -> str | None:
    """The child of `package` (a subpackage or a module) that `module` belongs to."""
    if not module.startswith(package + "."):
        return None
    return package + "." + module[len(package) + 1 :].split(".")[0]


def package_cycles(graph: dict[str, set[str]], packages: list[str]) -> list[str]:
    """For each package, the cycles between its children (subpackages and modules): an edge
    between two children is any import between a module of one and a module of the other."""
    graph = _through_front_door(graph)
    out = []
    for pkg in packages:
        children: dict[str, set[str]] = defaultdict(set)
        for mod, deps in graph.items():
            a = _unit(mod, pkg)
            if a is None:
                continue
            children[a]
            for dep in deps:
                b = _unit(dep, pkg)
                if b is not None and b != a:
                    children[a].add(b)
                    children[b]
        out += [f"{pkg}: {' <-> '.join(c)}" for c in cycles(dict(children))]
    return out


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


def _dotted(directory: Path) -> str:
    return ".".join(directory.relative_to(ROOT).parts)


def flat_families(names: list[str]) -> list[list[str]]:
    """Groups of sibling names that form a flat prefix family: `x` with `x_*`, or 3+ `x_*`."""
    by_prefix: dict[str, set[str]] = defaultdict(set)
    for n in names:
        by_prefix[n.split("_")[0]].add(n)
    out = []
    for prefix, group in sorted(by_prefix.items()):
        if len(group) > 1 and (prefix in group or len(group) >= 3):
            out.append(sorted(group))
    return out


def _children(directory: Path) -> list[str]:
    """The modules and subpackages directly in a package (not __init__/__main__)."""
    mods = [p.stem for p in directory.glob("*.py") if not re.fullmatch(r"__\w+__", p.stem)]
    subs = [p.name for p in directory.iterdir() if (p / "__init__.py").is_file()]
    return sorted(mods + subs)


def test_at_most_ten_modules_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_flat_prefix_family() -> None:
    found = {_dotted(d): fam for d in _packages() if (fam := flat_families(_children(d)))}
    assert found == {}


def test_every_package_says_what_it_is_for() -> None:
    missing = [
        _dotted(d) for d in _packages()
        if not (ast.get_docstring(ast.parse((d / "__init__.py").read_text(encoding="utf-8"))) or "").strip()
    ]
    assert missing == []


def test_every_module_on_a_floor_and_nothing_imports_up() -> None:
    assert against_the_direction(import_graph()) == []


def test_no_cycle_between_packages() -> None:
    modules = _project_modules()
    packages = sorted(m for m, p in modules.items() if p.name == "__init__.py" and _in(m, "traceview"))
    assert package_cycles(import_graph(modules), packages) == []


def test_the_checks_catch_a_family_an_upward_import_and_a_package_cycle() -> None:
    # the checker itself, on made-up names and graphs
    assert flat_families(["ablate", "ablate_rung", "diff", "export_parts", "worker_jobs",
                          "worker_pool", "worker_process"]) == [
        ["ablate", "ablate_rung"], ["worker_jobs", "worker_pool", "worker_process"]]
    assert flat_families(["code_browser", "code_view", "compile_facts", "compile_time"]) == []
    g = {
        "traceview": {"traceview.output.export", "traceview.ingest.loading"},
        "traceview.ingest.loading": {"traceview.output.report"},
        "traceview.ingest.pipeline": {"traceview"},
        "traceview.output.report": {"traceview.ingest.pipeline"},
        "traceview.output.export": set(),
        "traceview.gadget": set(),
    }
    assert against_the_direction(g) == [
        "traceview.gadget: on no floor (add it to FLOORS and to docs/architecture.md)",
        "traceview.ingest.loading -> traceview.output.report: imports up, from traceview.ingest to traceview.output",
        "traceview.ingest.pipeline -> traceview.output.export: imports up, from traceview.ingest to traceview.output",
    ]
    # no module-level cycle, but ingest and output import each other
    assert cycles({m: d - {"traceview"} for m, d in g.items()}) == []
    assert package_cycles(g, ["traceview", "traceview.ingest"]) == [
        "traceview: traceview.ingest <-> traceview.output"
    ]
