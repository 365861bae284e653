"""The guard that keeps tests writing only under their temporary directories (tests/conftest.py:
the checkout's untracked, ignored and changed files before and after the session)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT, checkout_changes


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_checkout_changes_names_what_a_test_left(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("/out/\n__pycache__/\n")
    (tmp_path / "kept.py").write_text("x = 1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    assert checkout_changes(tmp_path) == frozenset()
    (tmp_path / "export").write_text("/tmp/pytest-of-root/x/.out.tmp-1")  # what the old test left
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "page.html").write_text("ignored, still counted")
    (tmp_path / "kept.py").write_text("x = 2\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "kept.cpython-312.pyc").write_bytes(b"")
    assert checkout_changes(tmp_path) == {"export", "out/", "kept.py"}  # an ignored folder, whole


def test_not_a_checkout_is_no_guard(tmp_path: Path) -> None:
    assert checkout_changes(tmp_path / "nowhere") is None


def test_this_checkout_is_guarded() -> None:
    assert checkout_changes(ROOT) is not None or not (ROOT / ".git").exists()
