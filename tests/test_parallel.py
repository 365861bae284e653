"""The suite runs in pytest-xdist workers (tests/conftest.py): what the workers must share or
must not repeat."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_BEFORE, ROOT, is_xdist_worker


def _builds(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """One file for the whole session, every worker's: in the session's temporary root (a
    worker's base is `popen-gwN` inside it)."""
    base = factory.getbasetemp()
    return (base.parent if is_xdist_worker(config) else base) / "test_parallel_built_once"


@pytest.fixture(scope="module")
def built_once(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> int:
    """A module-scoped fixture that says each time it is built, and where: a line with its
    process's id in a file every worker of the session sees."""
    with open(_builds(request.config, tmp_path_factory), "a") as f:
        f.write(f"{os.getpid()}\n")
    return os.getpid()


def _built_once_here(request: pytest.FixtureRequest, factory: pytest.TempPathFactory, built_once: int) -> None:
    """The module's group mark, and one build in the whole session, in this test's process: a
    second build (the fixture built again for this test, or in another worker the group did
    not keep the module to) adds a line."""
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None and mark.args == ("tests/test_parallel.py",)
    assert _builds(request.config, factory).read_text().split() == [str(os.getpid())] == [str(built_once)]


# Three tests use the fixture: with the group broken, xdist would hand them to whichever
# workers are free, and a later one would see another worker's build.
def test_a_module_fixture_keeps_its_module_on_one_worker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, built_once: int
) -> None:
    """A test that uses a module-scoped fixture (a torch run, say) is in its module's
    xdist_group: the fixture is built once, in one worker."""
    _built_once_here(request, tmp_path_factory, built_once)


def test_a_module_fixture_is_built_once_for_its_second_user(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, built_once: int
) -> None:
    _built_once_here(request, tmp_path_factory, built_once)


def test_a_module_fixture_is_built_once_for_its_third_user(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, built_once: int
) -> None:
    _built_once_here(request, tmp_path_factory, built_once)


def test_a_function_fixture_leaves_the_test_free(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert request.node.get_closest_marker("xdist_group") is None


def test_the_checkout_is_checked_once_by_the_controller(request: pytest.FixtureRequest) -> None:
    """The checkout's files are listed at the start in the controller (or the only process),
    never in a worker: a worker's list would race the others' files."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert (CHECKOUT_BEFORE in request.config.stash) is not is_xdist_worker(request.config)


def test_each_worker_has_its_own_parse_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """TRACEVIEW_CACHE_DIR is under this process's tmp base: one worker's cache eviction never
    removes an entry another worker is reading."""
    base = tmp_path_factory.getbasetemp()
    assert os.environ["TRACEVIEW_CACHE_DIR"] == str(base / "cache")
    if "PYTEST_XDIST_WORKER" in os.environ:
        assert base.name == f"popen-{os.environ['PYTEST_XDIST_WORKER']}"
