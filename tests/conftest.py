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

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the parse cache of tests out of the user's cache directory."""
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def fixture_trace(name: str) -> Path:
    return FIXTURES / name / "trace"


def shared_inputs() -> list[Path]:
    """Every file and directory under shared/traces that holds logs (tlparse's inputs, one by one
    and as directories; the GPU scenarios' trace dirs and text logs)."""
    if not SHARED.is_dir():
        return []
    out = sorted(p for p in PEER.iterdir())
    out += sorted(p for d in PEER.iterdir() if d.is_dir() for p in d.iterdir())
    for d in sorted(GPU.iterdir()):
        if d.is_dir():
            out += [d / "trace", d / "torch_logs.txt", d]
    return out


def program_env() -> dict[str, str]:
    """This process's environment without the torch logging and minifier variables, for a
    real torch program run by a test."""
    env = dict(os.environ)
    for k in ("TORCH_LOGS", "TORCH_TRACE", "TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL"):
        env.pop(k, None)
    return env
