"""Shared paths and loaders. Every trace used here is a real torch log: the project's fixtures
(made by fixtures/make_fixtures.py with torch 2.13) or ../shared/traces (real GPU runs and
tlparse's own test inputs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SHARED = Path(os.environ.get("TRACEVIEW_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
PEER = SHARED / "peer-tlparse"
GPU = SHARED / "gpu"

# Every skip for want of the shared traces says this, so that the run's summary can count them
# (pytest_terminal_summary below): a clean clone without ../shared says loudly what it skipped.
SHARED_MISSING = f"needs the shared traces: {SHARED} is not there"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_MISSING)


def skip_without_shared() -> None:
    """Skip the calling test (with SHARED_MISSING) when the shared traces are absent."""
    if not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = [
        r for r in terminalreporter.stats.get("skipped", [])
        if isinstance(r.longrepr, tuple) and SHARED_MISSING in str(r.longrepr[2])
    ]
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} tests SKIPPED: {SHARED_MISSING}", yellow=True, bold=True)
        terminalreporter.write_line(
            "  they check real GPU runs and tlparse's multi-version logs; put the traces at "
            "../shared/traces or set TRACEVIEW_SHARED_TRACES"
        )
        for r in skipped:
            terminalreporter.write_line(f"  skipped: {r.nodeid}")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the parse cache of tests out of the user's cache directory."""
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def fixture_trace(name: str) -> Path:
    return FIXTURES / name / "trace"


def shared_inputs(*, non_empty: bool = False) -> list:
    """Every file and directory under shared/traces that holds logs (tlparse's inputs, one by one
    and as directories; the GPU scenarios' trace dirs and text logs); `non_empty`: without the
    empty files. Without the shared traces, one parameter that is skipped, saying why."""
    if not SHARED.is_dir():
        return [pytest.param(SHARED, marks=pytest.mark.skip(reason=SHARED_MISSING), id="shared-traces")]
    out = sorted(p for p in PEER.iterdir())
    out += sorted(p for d in PEER.iterdir() if d.is_dir() for p in d.iterdir())
    for d in sorted(GPU.iterdir()):
        if d.is_dir():
            out += [d / "trace", d / "torch_logs.txt", d]
    return [p for p in out if not (non_empty and p.is_file() and p.stat().st_size == 0)]


def program_env() -> dict[str, str]:
    """This process's environment without the torch logging and minifier variables, for a
    real torch program run by a test."""
    env = dict(os.environ)
    for k in ("TORCH_LOGS", "TORCH_TRACE", "TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL"):
        env.pop(k, None)
    return env
