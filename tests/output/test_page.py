"""`traceview report DIR -o report.html`: the page's content checked in its text, and in a real
browser (headless Chromium, skipped with the reason when it is not installed): it renders with
no script error, shows the findings and one timeline bar per compile, search narrows the
compile list, and a screenshot is not blank."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from html import unescape
from pathlib import Path

import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.cli import main
from traceview.output import page
from traceview.output.report import build_report, render_text
from traceview.output.timeline import compile_rows

MULTIRANK = FIXTURES / "multirank" / "trace"
RECOMPILES = FIXTURES / "recompiles" / "trace"
CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)


@pytest.fixture(scope="module")
def multirank_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", str(MULTIRANK), "-o", str(out), "--no-cache"]) == 0
    return out


def _forward_bars(path: Path) -> int:
    rows = compile_rows(traceview.load(path))
    return rows.filter(rows["part"] == "forward").height


def test_page_holds_the_summary_in_its_order(multirank_page: Path) -> None:
    html = multirank_page.read_text()
    text = render_text(build_report(traceview.load(MULTIRANK)), width=page.TEXT_WIDTH)
    headings = [line for line in text.splitlines() if re.match(r"^[A-Z][A-Z ]+ ", line)]
    assert headings[:4] == [
        "RANK STALLS  ranks waited while another rank compiled alone",
        "RECOMPILES  1 function, most costly first",
        "GRAPH BREAKS  1 distinct, 2 in all, most impact first",
        "RANK DIVERGENCE  the 2 ranks compiled differently (rank 1 shown against rank 0)",
    ]
    at = [html.index(f"<h3>{h}</h3>") for h in headings]
    assert at == sorted(at)
    assert "dimension 0 of x varies (seen: 8, 6)" in html
    # the recompile links to its compiles: rank 1's 0/0 and 0/1, which exist as anchors
    section = html[at[1] : at[2]]
    links = re.findall(r'href="#([^"]+)"', section)
    assert links == ["c1-0-0-1", "c1-0-1-1"]
    for a in links:
        assert f'id="{a}"' in html
    # the recompile's detail links back to its predecessor
    detail = html[html.index('id="c1-0-1-1"') :]
    assert '<b>recompile of</b><a href="#c1-0-0-1">[0/0]</a>' in detail[: detail.index("</details>")]


def test_page_is_self_contained_and_escaped(multirank_page: Path) -> None:
    html = multirank_page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert not re.search(r"<(link|img|iframe)\b", html, re.I)
    assert "<script src" not in html
    # log text is data: the user stack's `<module>` is escaped, never markup
    assert "in &lt;module&gt;" in html and "<module>" not in html
    assert html.count('<g class="bar') == _forward_bars(MULTIRANK) == 7
    assert html.count("<details class=\"compile") == 7
    assert '<svg id="grid"' in html  # two ranks: the rank x compile grid, rank 1 divergent
    assert re.search(r'<g class="rank divergent"><title>compiles 0/1', html)


def test_identical_payloads_stored_once_and_cut(tmp_path: Path) -> None:
    trace = traceview.load(MULTIRANK)
    html = page.render_page(trace)
    refs = re.findall(r'data-blob="([0-9a-f]+)"', html)
    stored = re.findall(r'<template id="b-([0-9a-f]+)">', html)
    assert len(stored) == len(set(stored)) and set(refs) == set(stored)
    assert len(stored) < len(refs)  # the two ranks' equal graphs and stacks: once each
    blobs = page._Blobs()
    key = blobs.add("x" * (page.PAYLOAD_CHARS + 5))
    assert blobs.texts[key]["left"] == 5 and len(blobs.texts[key]["text"]) == page.PAYLOAD_CHARS
    assert blobs.add("x" * (page.PAYLOAD_CHARS + 5)) == key and len(blobs.texts) == 1


def test_failed_compile_and_recompile_limit_page(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(RECOMPILES), "-o", str(out), "--no-cache"]) == 0
    html = out.read_text()
    assert "FAILED COMPILES" in html and 'class="bar failed' in html
    assert html.count('<g class="bar') == _forward_bars(RECOMPILES)
    assert "Dynamo recompile limit exceeded" in html
    assert not list(tmp_path.glob(".r.html.tmp-*"))  # written atomically


# ------------------------------------------------------------------ in a real browser
def _chromium(args: list[str], url: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr", "--v=0", *args, url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def test_browser_renders_findings_and_bars(multirank_page: Path, tmp_path: Path) -> None:
    r = _chromium(["--dump-dom"], multirank_page.as_uri(), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not _console_errors(r.stderr)
    dom = r.stdout
    assert "RECOMPILES  1 function, most costly first" in dom
    assert dom.count('<g class="bar') == 7
    assert "7 of 7 compiles" in dom


def test_browser_search_narrows_the_list(multirank_page: Path, tmp_path: Path) -> None:
    def shown(query: str) -> list[str]:
        r = _chromium(["--dump-dom"], multirank_page.as_uri() + "#q=" + query, tmp_path)
        assert r.returncode == 0 and not _console_errors(r.stderr), r.stderr[-2000:]
        ids = re.findall(r'<details class="compile[^"]*" id="([^"]+)"(?![^>]*hidden)', r.stdout)
        assert f"{len(ids)} of 7 compiles" in r.stdout
        return ids

    # "rank 1" is rank 1 (not 10); "[1/0]" the compile id
    assert shown("rank%201%20%5B1/0%5D") == ["c1-1-0-1"]
    assert shown("rank%200") == ["c0-0-0-1", "c0-1-0-1", "c0-2-0-1"]
    # text inside the stored payloads counts: `l_x_` is only in the graphs' text
    html = multirank_page.read_text()
    assert "l_x_" not in "".join(re.findall(r'data-k="([^"]*)"', html))
    blobs = {k: unescape(v) for k, v in re.findall(r'<template id="b-([0-9a-f]+)">(.*?)</template>', html, re.S)}
    want = [a for a, refs in re.findall(r'<details class="compile[^"]*" id="([^"]+)" data-k="[^"]*" data-blobs="([^"]*)"', html)
            if any("l_x_" in blobs[b].lower() for b in refs.split())]
    assert want and shown("l_x_") == want


def _png_pixels_vary(png: bytes) -> bool:
    """Not one colour: the decompressed scanlines hold more than a few byte values."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat))) > 16


def test_browser_screenshot_is_not_blank(multirank_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    r = _chromium([f"--screenshot={shot}", "--window-size=1280,1600"], multirank_page.as_uri(), tmp_path)
    assert shot.exists(), r.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    assert _png_pixels_vary(shot.read_bytes())


def test_browser_script_errors_are_seen(tmp_path: Path) -> None:
    """The no-script-error checks above are not vacuous: a page that throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>noSuchFunction();</script></body></html>")
    r = _chromium(["--dump-dom"], bad.as_uri(), tmp_path)
    assert any("noSuchFunction" in line for line in _console_errors(r.stderr))


def test_page_of_an_export_is_the_page_of_its_logs(multirank_page: Path, tmp_path: Path) -> None:
    """An export is an input like its logs: the same compiles, findings and stored payloads."""
    assert main(["export", str(MULTIRANK), "-o", str(tmp_path / "exp"), "--no-cache"]) == 0
    out = tmp_path / "exp.html"
    assert main(["report", str(tmp_path / "exp"), "-o", str(out)]) == 0
    html, logs = out.read_text(), multirank_page.read_text()

    def stored(h: str) -> set[str]:
        return set(re.findall(r'<template id="b-([0-9a-f]+)">', h))

    assert stored(html) == stored(logs) and len(stored(html)) > 3
    assert re.findall(r"<h3>(.*?)</h3>", html) == re.findall(r"<h3>(.*?)</h3>", logs)
    assert html.count('<g class="bar') == 7


# ------------------------------------------------------------------ kernels, collectives, unfinished
def _blob(html: str, key: str) -> str:
    return unescape(re.search(rf'<template id="b-{key}"><pre>(.*?)</pre>', html, re.S).group(1))


def test_compile_detail_lists_its_kernels_with_their_origin_lines() -> None:
    """fixtures/training (Inductor on CPU, one training compile): the 13 kernels of [0/0] in the
    wrapper's order, each with the user lines `traceview origin` ties it to (its exact chains)."""
    from traceview.analyze.origin import origin

    trace = traceview.load(FIXTURES / "training")
    html = page.render_page(trace)
    [(count, key)] = re.findall(r'<b>kernels \((\d+)\) and the source lines they compute</b><div data-blob="([0-9a-f]+)">', html)
    assert count == "13" == str(trace.kernels.height)
    text = _blob(html, key)
    assert text.startswith(
        "cpp_fused_relu_0  (cpp, 0_forward)\n    <- training.py:21  h = torch.relu(self.fc1(x))\n"
        "cpp_fused_erf_mul_1  (cpp, 0_forward)\n    <- training.py:23  h = torch.erf(h) * 0.5\n"
    )
    # every kernel's lines are exactly origin's exact chains for that kernel
    blocks = re.split(r"\n(?=\S)", text)
    kernels = trace.kernels.sort("lineno", "order")
    assert len(blocks) == kernels.height
    for block, (kid, name) in zip(blocks, kernels.select("kernel_id", "name").iter_rows(), strict=True):
        want = [f"{Path(c.user_file).name}:{c.user_line}  {c.user_code}" for c in origin(trace, kernel=kid) if c.user_file]
        assert block.split("\n")[0].startswith(name + "  (")
        assert [x.removeprefix("    <- ") for x in block.split("\n")[1:]] == (want or ["no source line recorded"])
    assert "cpp_fused_sum_threshold_backward_1  (cpp, 0_backward)\n    <- training.py:21" in text


def test_collectives_mismatch_is_a_finding_box_with_its_ranks_compiles(tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    assert main(["report", str(FIXTURES / "corpus" / "collective_extra_rank"), "-o", str(out), "--no-cache"]) == 0
    html = out.read_text()
    boxes = re.findall(r'<section class="finding (\w+)">\n<h3>(.*?)</h3>', html)
    assert boxes[0] == ("problem", "COLLECTIVES  the ranks do not issue the same collectives")
    box = html[html.index("<h3>COLLECTIVES") : html.index("</section>", html.index("<h3>COLLECTIVES"))]
    assert "rank 2&#39;s <a href=\"#c2-0-0-1\">[0/0]</a> step (collective_extra_rank.py:31) issues 2 all_reduce" in box
    assert re.findall(r'<a href="#([^"]+)">rank', box) == ["c2-0-0-1", "c0-0-0-1", "c1-0-0-1", "c3-0-0-1"]


def test_unfinished_compile_of_a_cut_log_is_a_finding_box(tmp_path: Path) -> None:
    """The 4-rank run with rank 1's log cut inside its first compile (as tests/analyze/test_unfinished.py)."""
    from tests.analyze.test_unfinished import _cut

    logs = tmp_path / "logs"
    logs.mkdir()
    for f in (FIXTURES / "corpus" / "multirank4" / "trace").glob("*.gz"):
        if "_rank_1_" in f.name:
            _cut(f, logs / f.name.removesuffix(".gz"), 500)
        else:
            shutil.copy(f, logs / f.name)
    out = tmp_path / "u.html"
    assert main(["report", str(logs), "-o", str(out), "--no-cache"]) == 0
    html = out.read_text()
    boxes = re.findall(r'<section class="finding (\w+)">\n<h3>(.*?)</h3>', html)
    assert boxes[0][0] == "problem" and boxes[0][1].startswith("UNFINISHED COMPILES")
    box = html[html.index("<h3>UNFINISHED") : html.index("</section>", html.index("<h3>UNFINISHED"))]
    assert 'rank 1 <a href="#c1-0-0-1">[0/0]</a> TinyNet.forward (multirank4.py:30) in AOTAutograd for ' in box
    assert re.findall(r'<a href="#([^"]+)">rank', box) == ["c1-0-0-1"]
    assert 'id="c1-0-0-1"' in html


def test_kernels_are_left_to_open_past_a_few_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank's graph tables made the 48-rank page 2.1x the summary's time: past
    KERNELS_MAX_PROCESSES the page lists no kernels and says where they are."""
    trace = traceview.load(FIXTURES / "training")
    assert "kernels (" in page.render_page(trace) and "Kernels are listed for inputs" not in page.render_page(trace)
    monkeypatch.setattr(page, "KERNELS_MAX_PROCESSES", 0)
    html = page.render_page(traceview.load(FIXTURES / "training"))
    assert "kernels (" not in html
    assert "Kernels are listed for inputs of up to 0 processes; this one has more: traceview open" in html
