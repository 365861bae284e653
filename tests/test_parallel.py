"""The suite runs in pytest-xdist workers (tests/conftest.py): what the workers must share or
must not repeat."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CHECKOUT_BEFORE, ROOT, is_xdist_worker


@pytest.fixture(scope="module")
def built_once() -> list[int]:
    return [os.getpid()]


def test_a_module_fixture_keeps_its_module_on_one_worker(request: pytest.FixtureRequest, built_once: list[int]) -> None:
    """A test that uses a module-scoped fixture (a torch run, say) is in its module's
    xdist_group: the fixture is built once, in one worker."""
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None and mark.args == ("tests/test_parallel.py",)
    assert built_once == [os.getpid()]


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
