"""Import boundaries (see pyproject.toml): the parsers and the analyzers never import Textual or
Rich, and nothing outside traceview/tui imports Textual (so `summary` and `export` start fast)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.conftest import ROOT


def _modules(package: str) -> list[str]:
    mod = __import__(package, fromlist=["__path__"])
    return [package] + [f"{package}.{m.name}" for m in pkgutil.iter_modules(mod.__path__)]


def _imported_after(modules: list[str]) -> set[str]:
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print('\\n'.join(sorted({k.split('.')[0] for k in sys.modules})))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_parsers_and_analyzers_import_neither_textual_nor_rich() -> None:
    mods = _modules("parsers") + _modules("traceview.analyze")
    loaded = _imported_after(mods)
    assert "textual" not in loaded
    assert "rich" not in loaded


def test_headless_traceview_does_not_import_textual() -> None:
    mods = [
        *_modules("parsers"),
        "traceview",
        *_modules("traceview.analyze"),
        "traceview.output.report",
        "traceview.cli",
        "traceview.ingest.cache",
        "traceview.output.export",
        "traceview.trace",
        "traceview.workflow.ablate",
        "traceview.workflow.ablate.rung",
        "traceview.workflow.ablate.verdict",
        "traceview.workflow.repro",
    ]
    loaded = _imported_after(mods)
    assert "textual" not in loaded


def test_the_tui_imports_textual() -> None:
    # the other side of the boundary: the UI package is where Textual lives
    loaded = _imported_after(["traceview.tui.app"])
    assert "textual" in loaded


# ----------------------------------------------------------------------------- the import graph
# Every `import` and `from ... import` in parsers/ and traceview/, wherever it stands (module
# level, inside a function, under `if TYPE_CHECKING:`), read from the source's AST: an import
# hidden in a function is still a dependency, and a cycle through one is still a cycle.
PACKAGES = ("parsers", "traceview")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The project module `target` names (itself, or the module holding the name), or None."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """module -> the project modules it imports. `from pkg import sub` counts as an import of
    `pkg.sub` when `sub` is a module (not of `pkg`'s __init__, which Python also runs: that
    edge is implied for every submodule and says nothing about the layering)."""
    modules = modules if modules is not None else _project_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = name if is_pkg else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                dep = _resolve(t, modules)
                if dep is not None and dep != name:
                    graph[name].add(dep)
    return graph


def external_imports(path: Path) -> set[str]:
    """Top-level names of the non-project packages a file imports (anywhere in it)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - set(PACKAGES)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# The layers, bottom up. A module may import its own layer's modules and those of the layers
# below; `traceview` (the package __init__) is the library's front door and may import
# anything but the UI and the CLI.
UTILITIES = ("traceview.errors", "traceview.timing", "traceview.versions", "traceview.printable")
MODEL = ("traceview.trace",)
ANALYZERS = ("traceview.analyze",)
LOADING = ("traceview.ingest",)


def violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            why = None
            if _in(mod, "parsers") and not _in(dep, "parsers"):
                why = "parsers import nothing of traceview"
            elif _in(mod, *UTILITIES) and not _in(dep, "parsers", *UTILITIES):
                why = "the utilities import only parsers and each other"
            elif _in(mod, *MODEL) and not _in(dep, "parsers", *UTILITIES, *MODEL):
                why = "the Trace model imports only parsers and utilities"
            elif _in(mod, *ANALYZERS) and not _in(dep, "parsers", *UTILITIES, *MODEL, *ANALYZERS):
                why = "analyzers import only parsers, utilities, the model and each other"
            elif _in(mod, *LOADING) and _in(dep, *ANALYZERS, "traceview.output"):
                why = "loading a trace needs no analysis, report or export"
            elif _in(dep, "traceview.tui") and not _in(mod, "traceview.tui", "traceview.cli"):
                why = "only the CLI opens the UI"
            elif dep == "traceview.cli" and mod != "traceview.__main__":
                why = "nothing imports the CLI (it is the top)"
            if why:
                bad.append(f"{mod} -> {dep}: {why}")
    return bad


def test_the_import_graph_sees_imports_inside_functions() -> None:
    # traceview.cli imports traceview.ingest.loading and the summary's text only inside its functions
    # (start-up time: a cached summary imports neither polars nor the analyzers); the graph has both
    assert {"traceview.ingest.loading", "traceview.output.summary"} <= import_graph()["traceview.cli"]
    assert "traceview.ingest.loading" not in (ROOT / "traceview" / "cli.py").read_text().split("\ndef ")[0]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_import_against_the_layering() -> None:
    assert violations(import_graph()) == []


def test_only_the_tui_imports_textual_and_rich() -> None:
    offenders = [
        f"{name}: {sorted(ext & {'textual', 'rich'})}"
        for name, path in _project_modules().items()
        if not _in(name, "traceview.tui") and (ext := external_imports(path)) & {"textual", "rich"}
    ]
    assert offenders == []


def test_the_checks_catch_a_cycle_and_an_upward_import() -> None:
    # the checker itself, on a made-up graph: a cycle hidden in a function and an analyzer
    # that reaches up into the report are both found
    g = {
        "traceview.trace": {"traceview.ingest.pipeline"},
        "traceview.ingest.pipeline": {"traceview.trace"},
        "traceview.analyze.storms": {"traceview.output.report"},
        "traceview.output.report": {"traceview.analyze.storms"},
        "parsers.graphs": {"traceview.analyze.origin"},
        "traceview.analyze.origin": set(),
    }
    assert cycles(g) == [
        ["traceview.analyze.storms", "traceview.output.report"],
        ["traceview.ingest.pipeline", "traceview.trace"],
    ]
    assert violations(g) == [
        "parsers.graphs -> traceview.analyze.origin: parsers import nothing of traceview",
        "traceview.analyze.storms -> traceview.output.report: analyzers import only parsers, utilities, the model and each other",
        "traceview.trace -> traceview.ingest.pipeline: the Trace model imports only parsers and utilities",
    ]


# ------------------------------------------------------------------------ private names stay home
def private_uses(modules: dict[str, Path] | None = None) -> list[str]:
    """Where a module uses another project module's private name: `from m import _x`, or
    `m._x` through a name bound to a project module by an import (what another module needs
    gets a public name in the module that owns it)."""
    modules = modules if modules is not None else _project_modules()
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        bound: dict[str, str] = {}  # local name -> project module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules:
                        bound[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if target in modules:
                        bound[a.asname or a.name] = target
                    elif node.module in modules and a.name.startswith("_") and not a.name.startswith("__"):
                        out.append(f"{name}: from {node.module} import {a.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and bound.get(node.value.id, name) != name
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                out.append(f"{name}: {bound[node.value.id]}.{node.attr}")
    return sorted(set(out))


def test_no_module_uses_another_modules_private_names() -> None:
    assert private_uses() == []


def test_the_private_name_check_finds_both_forms(tmp_path: Path) -> None:
    # hand-written modules: the two ways export.py used to reach into the pipeline
    (tmp_path / "owner.py").write_text("def _parts():\n    return []\n")
    (tmp_path / "user.py").write_text(
        "from traceview.owner import _parts\n"
        "from traceview import owner\n"
        "def f():\n"
        "    return owner._parts(), _parts()\n"
    )
    mods = {"traceview.owner": tmp_path / "owner.py", "traceview.user": tmp_path / "user.py"}
    assert private_uses(mods) == [
        "traceview.user: from traceview.owner import _parts",
        "traceview.user: traceview.owner._parts",
    ]


# ------------------------------------------------------------------ analyzers take a Trace
# The rule is traceview/analyze/__init__.py's docstring. Read from the source (no import): a
# public function of traceview.analyze with a table first must be a declared TABLE_HELPER, one
# with a Trace first takes nothing else positionally, and what the rest of the project calls
# from traceview.analyze never takes a table first.
_TABLE_TYPES = ("DataFrame", "LazyFrame", "Series", "Mapping", "TableSource")


def _first_annotation(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str | None, str | None]:
    """(name, annotation) of a function's first parameter; (None, None) without one."""
    params = node.args.posonlyargs + node.args.args
    if not params:
        return None, None
    return params[0].arg, ast.unparse(params[0].annotation) if params[0].annotation is not None else None


def _is_table(annotation: str | None) -> bool:
    """Whether a first parameter may be a table: unannotated, `Any`, or naming a table type."""
    return annotation is None or annotation == "Any" or any(t in annotation for t in _TABLE_TYPES)


def analyzer_functions(modules: dict[str, Path]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """module.function -> its definition, for every public function of traceview.analyze."""
    out = {}
    for name, path in modules.items():
        if _in(name, *ANALYZERS):
            for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                    out[f"{name}.{node.name}"] = node
    return out


def analyzer_uses(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module outside traceview.analyze -> the analyze functions it uses, imported by name
    (`from traceview.analyze.failures import failures`) or through a module
    (`from traceview.analyze import compile_time as ct` ... `ct.by_function`), anywhere."""
    functions = analyzer_functions(modules)
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        if _in(name, *ANALYZERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        bound: dict[str, str] = {}  # local name -> analyze module
        used: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound.update({a.asname: a.name for a in node.names if a.asname and _in(a.name, *ANALYZERS)})
            elif isinstance(node, ast.ImportFrom) and node.module and _in(node.module, *ANALYZERS):
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if target in functions:
                        used.add(target)
                    elif target in modules:
                        bound[a.asname or a.name] = target
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                target = f"{bound[node.value.id]}.{node.attr}"
                if target in functions:
                    used.add(target)
        if used:
            out[name] = used
    return out


def analyzer_rule_violations(modules: dict[str, Path] | None = None, table_helpers: Iterable[str] | None = None) -> list[str]:
    from traceview.analyze import TABLE_HELPERS

    modules = modules if modules is not None else _project_modules()
    helpers = set(TABLE_HELPERS if table_helpers is None else table_helpers)
    functions = analyzer_functions(modules)
    out = []
    for qual, node in functions.items():
        param, ann = _first_annotation(node)
        if param is None:
            continue
        if ann == "Trace":
            rest = (node.args.posonlyargs + node.args.args)[1:]
            if rest:
                out.append(f"{qual}: options after the Trace are keyword-only (`*, {rest[0].arg}`)")
        elif ann is None:
            out.append(f"{qual}: its first parameter `{param}` has no annotation")
        elif _is_table(ann) and qual not in helpers:
            out.append(f"{qual}: takes a table first ({param}: {ann}): an analyzer takes a Trace; "
                       "a table-level building block is private or named in TABLE_HELPERS")
    for mod, used in sorted(analyzer_uses(modules).items()):
        for qual in sorted(used):
            param, ann = _first_annotation(functions[qual])
            if param is not None and ann != "Trace" and _is_table(ann):
                out.append(f"{mod} calls {qual}, which takes {param}: {ann} first, not a Trace")
    return sorted(out)


def test_analyzers_take_a_trace() -> None:
    assert analyzer_rule_violations() == []


def test_the_analyzer_check_sees_what_report_diff_and_the_ui_call() -> None:
    uses = analyzer_uses(_project_modules())
    a = "traceview.analyze."
    assert {f"{a}failures.failures", f"{a}crashes.crash_findings", f"{a}divergence.rank_divergence",
            f"{a}storms.recompile_storms", f"{a}compile_time.by_function", f"{a}compile_time.phase_totals",
            f"{a}optimizer.compiled_optimizer_findings"} <= uses["traceview.output.report"]
    # diff's comparison lives in analyze (analyze.diff.compare_runs, over the analyzers); the
    # command's module calls it
    assert f"{a}diff.compare_runs" in uses["traceview.workflow.diff"]
    assert f"{a}origin.origin_table" in uses["traceview.tui.code_browser"]
    assert f"{a}origin.origin" in uses["traceview.cli"]


def test_the_analyzer_check_catches_a_table_first(tmp_path: Path) -> None:
    # hand-written modules: an analyzer over tables (what failures, rank_divergence and the
    # compile-time functions were), an unannotated one, a positional option after the Trace,
    # and a table helper called from the report
    (tmp_path / "fails.py").write_text(
        "import polars as pl\n"
        "from traceview.trace import Trace\n"
        "def failures(compiles: pl.DataFrame, *, limit_hits: pl.DataFrame | None = None) -> pl.DataFrame: ...\n"
        "def storms(trace: Trace, limit: int = 8) -> list: ...\n"
        "def origin(tables, kernel=None): ...\n"
        "def rows_of(compiles: pl.DataFrame) -> pl.DataFrame: ...\n"
        "def headline(reason: str | None) -> str: ...\n"
        "def _private(compiles: pl.DataFrame) -> pl.DataFrame: ...\n"
        "def good(trace: Trace, *, caught: bool = True) -> list: ...\n"
    )
    (tmp_path / "report.py").write_text(
        "from traceview.analyze.fails import failures, headline, good\n"
        "def build(t):\n"
        "    from traceview.analyze import fails as f\n"
        "    return f.rows_of(t.compiles), failures(t.compiles), headline('x'), good(t)\n"
    )
    mods = {"traceview.analyze.fails": tmp_path / "fails.py", "traceview.output.report": tmp_path / "report.py"}
    assert analyzer_rule_violations(mods, table_helpers={"traceview.analyze.fails.rows_of"}) == [
        "traceview.analyze.fails.failures: takes a table first (compiles: pl.DataFrame): an analyzer takes a Trace; "
        "a table-level building block is private or named in TABLE_HELPERS",
        "traceview.analyze.fails.origin: its first parameter `tables` has no annotation",
        "traceview.analyze.fails.storms: options after the Trace are keyword-only (`*, limit`)",
        "traceview.output.report calls traceview.analyze.fails.failures, which takes compiles: pl.DataFrame first, not a Trace",
        "traceview.output.report calls traceview.analyze.fails.rows_of, which takes compiles: pl.DataFrame first, not a Trace",
    ]
