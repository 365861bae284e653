"""Shared paths and loaders. Every trace used here is a real torch log: the project's fixtures
(made by fixtures/make_fixtures.py with torch 2.13) or ../shared/traces (real GPU runs and
tlparse's own test inputs)."""

from __future__ import annotations

import os
import subprocess
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
    left = terminalreporter.config.stash.get(CHECKOUT_LEFT, [])
    if left:
        terminalreporter.write_sep("!", f"FAILED: the tests left {len(left)} files in the checkout {ROOT}", red=True, bold=True)
        terminalreporter.write_line("  tests write only under their tmp_path; these appeared or changed during the run:")
        for p in left[:50]:
            terminalreporter.write_line(f"  {p}")
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


# ------------------------------------------------------------------ running in parallel
# The suite (`python -m pytest`, or directories of it) runs in pytest-xdist workers by default:
# `-n auto --dist loadgroup`, one worker per CPU, tests handed out one at a time to whichever
# worker is free. A run that names files or test ids runs in one process: starting the
# workers costs more than they save there (`-n auto` asks for them). Set here rather than in
# pyproject's addopts so that `-n0` and `-p no:xdist` (one process, for debugging) both work,
# and so does a checkout without pytest-xdist: it runs serially. `-n N` chooses N workers;
# `--pdb` runs in one process (xdist's own rule).


def _whole_directories(config: pytest.Config) -> bool:
    """True where the run names no test files or ids: only directories (or nothing, testpaths)."""
    here = config.invocation_params.dir
    return all("::" not in a and (here / a).is_dir() for a in config.args)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    opt = config.option
    if is_xdist_worker(config):
        # a worker parses the command line again, which does not say --dist loadgroup: it is
        # told by pytest_configure_node below (xdist's own hook then reads the groups)
        if config.workerinput.get("traceview_dist") == "loadgroup":
            opt.loadgroup = True
        return
    if not config.pluginmanager.hasplugin("xdist"):
        return
    if opt.numprocesses is None and not opt.distload and _whole_directories(config):
        opt.numprocesses = "auto"
    if opt.numprocesses and opt.dist == "no" and not opt.distload:
        opt.dist = "loadgroup"  # also for `-n N`: the groups below hold


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's hook, in the controller, for each worker it starts: the distribution mode."""
    node.workerinput["traceview_dist"] = node.config.option.dist


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """For xdist: (1) a test that uses a module- or class-scoped fixture (a torch run, a page
    built once) joins its module's xdist_group, so that the fixture is built once, on one
    worker, not once per worker or again each time the worker comes back to the module;
    (2) in a worker, the tests marked `e2e` (real torch runs, tmux, Chromium, a followed
    growing log: the long ones) go first, so the workers share them instead of one of them
    finishing alone on the last one. Serially the order stays the files' order."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        scopes = {d.scope for defs in info.name2fixturedefs.values() for d in defs}
        if scopes & {"module", "class", "package"}:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    if is_xdist_worker(config):
        items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


# Tests write only under their temporary directories. The checkout's untracked and changed
# files are listed when the session starts and when it ends; anything new fails the run, named
# (a file `export` holding a test's temporary path was once committed at the root). The
# interpreter's and tools' own litter (and textual-snapshot's failure report) is not counted.
LITTER = ("__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis", ".venv", "snapshot_report.html")
CHECKOUT_BEFORE = pytest.StashKey[frozenset]()
CHECKOUT_LEFT = pytest.StashKey[list]()


def checkout_changes(root: Path) -> frozenset[str] | None:
    """The paths under `root` that git lists as untracked, ignored or changed (one `git status`),
    without LITTER; None where `root` is no git checkout (a tarball, say)."""
    try:
        r = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching"],
            capture_output=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    paths = (e[3:].decode("utf-8", "replace") for e in r.stdout.split(b"\0") if len(e) > 3)
    return frozenset(p for p in paths if not any(part in LITTER for part in p.split("/")))


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker process (the controller, or a run without xdist: False)."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Once per run: in the controller (or the only process), not in each xdist worker, which
    # would race the others' files and whose exit status is not the run's.
    if is_xdist_worker(session.config):
        return
    before = checkout_changes(ROOT)
    if before is not None:
        session.config.stash[CHECKOUT_BEFORE] = before


def pytest_sessionfinish(session: pytest.Session) -> None:
    if is_xdist_worker(session.config):
        return
    before = session.config.stash.get(CHECKOUT_BEFORE, None)
    after = checkout_changes(ROOT) if before is not None else None
    left = sorted(after - before) if after is not None and before is not None else []
    if left:
        session.config.stash[CHECKOUT_LEFT] = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
