"""Import boundaries (see pyproject.toml): the parsers and the analyzers never import Textual or
Rich, and nothing outside traceview/tui imports Textual (so `summary` and `export` start fast)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

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
        "traceview.report",
        "traceview.cli",
        "traceview.cache",
        "traceview.export",
        "traceview.trace",
        "traceview.ablate",
        "traceview.ablate_rung",
        "traceview.ablate_verdict",
        "traceview.repro",
    ]
    loaded = _imported_after(mods)
    assert "textual" not in loaded


def test_only_the_tui_package_imports_textual() -> None:
    offenders = []
    for path in [*(ROOT / "traceview").rglob("*.py"), *(ROOT / "parsers").rglob("*.py")]:
        if "tui" in path.relative_to(ROOT).parts:
            continue
        text = path.read_text(encoding="utf-8")
        if "import textual" in text or "from textual" in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_tui_imports_textual() -> None:
    # the other side of the boundary: the UI package is where Textual lives
    loaded = _imported_after(["traceview.tui.app"])
    assert "textual" in loaded
