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

import polars as pl
import pytest

import traceview
from tests.conftest import FIXTURES
from traceview.analyze.finding import findings_of
from traceview.cli import main
from traceview.output import page
from traceview.output.report import build_report
from traceview.output.summary import render_text
from traceview.output.timeline import piece_rows

MULTIRANK = FIXTURES / "multirank" / "trace"
AOTI = FIXTURES / "corpus" / "aoti_export"
FUNCOL_EXTRA = FIXTURES / "gpu" / "funcol_extra_allreduce"
RECOMPILES = FIXTURES / "recompiles" / "trace"
CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)


@pytest.fixture(scope="module")
def multirank_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", str(MULTIRANK), "-o", str(out), "--no-cache"]) == 0
    return out


def _forward_bars(path: Path) -> int:
    rows = piece_rows(traceview.load(path))
    return rows.filter(rows["piece"] == "forward").height


_BOX = re.compile(
    r'<section class="finding (\w+)" data-key="[^"]*">\n<h3><span class="tag">(.*?)</span>.*?</h3>\n<p class="claim">(.*?)</p>(.*?)</section>',
    re.S,
)


def _boxes(html: str) -> list[tuple[str, str, str, str]]:
    """(severity, kind title, claim, the rest of the box) of each finding box, in page order."""
    return _BOX.findall(html)


def test_page_holds_the_findings_in_their_order(multirank_page: Path) -> None:
    html = multirank_page.read_text()
    report = build_report(traceview.load(MULTIRANK))
    want = findings_of(report)
    boxes = _boxes(html)
    # the report's typed findings, in their order, with the summary's words (no second wording)
    assert [(b[0], b[1]) for b in boxes] == [(f.severity, f.title) for f in want]
    assert [b[1] for b in boxes] == ["RANK STALL", "GRAPH BREAK", "SLOW COMPILE"]
    text = render_text(report, width=page.TEXT_WIDTH)
    for f in want:
        assert f.claim in " ".join(text.split()) or f.claim in text
    assert "for another size (dim 0 of x: 6, not 8)" in unescape(boxes[0][2])
    # the stall links to rank 1's recompile, which exists as an anchor
    links = re.findall(r'href="#([^"]+)"', boxes[0][3])
    assert set(links) == {"c1-0-1-1"}
    for a in links:
        assert f'id="{a}"' in html
    # the figures follow the findings, as the summary's text writes them
    assert html.index("COMPILE TIME  4.62s in all") > html.index(boxes[-1][2])
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
    assert '<svg id="grid"' in html  # two ranks: the compile x rank grid, rank 1 divergent
    assert re.search(r'<g class="rank divergent" data-rank="1"><title>compiles 0/1', html)


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


def test_each_distinct_payload_is_read_once_and_given_to_every_rank(tmp_path: Path) -> None:
    """The page reads a payload logged alike on several ranks once (same md5 and length) and
    every event gets its own text: equal to reading each event's payload from its file."""
    from parsers.torch_trace import hydrate

    trace = traceview.load(MULTIRANK)
    ev = trace.index_events().filter(pl.col("payload_start").is_not_null())
    full, _ = hydrate(ev)
    distinct = page._hydrate_distinct(ev)
    assert distinct["payload"].to_list() == full["payload"].to_list()
    keys = ev.select(pl.col("payload_md5"), pl.col("payload_end") - pl.col("payload_start"))
    assert keys.n_unique() < ev.height  # the ranks share payloads: fewer reads than events
    assert ev["payload_md5"].null_count() == 0


def test_failed_compile_and_recompile_limit_page(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(RECOMPILES), "-o", str(out), "--no-cache"]) == 0
    html = out.read_text()
    # the refusal at the recompile limit is the storm's own: said in its box
    [storm] = [b for b in _boxes(html) if b[1] == "RECOMPILE STORM"]
    assert "HIT THE RECOMPILE LIMIT (8) at" in storm[2] and "Dynamo recompile limit exceeded" in storm[3]
    assert 'class="bar failed' in html
    assert html.count('<g class="bar') == _forward_bars(RECOMPILES)
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


@pytest.mark.e2e
def test_browser_renders_findings_and_bars(multirank_page: Path, tmp_path: Path) -> None:
    r = _chromium(["--dump-dom"], multirank_page.as_uri(), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not _console_errors(r.stderr)
    dom = r.stdout
    assert '<span class="tag">RANK STALL</span>' in dom
    assert dom.count('<g class="bar') == 7
    assert "7 of 7 compiles" in dom


@pytest.mark.e2e
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


@pytest.mark.e2e
def test_browser_screenshot_is_not_blank(multirank_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    r = _chromium([f"--screenshot={shot}", "--window-size=1280,1600"], multirank_page.as_uri(), tmp_path)
    assert shot.exists(), r.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    assert _png_pixels_vary(shot.read_bytes())


@pytest.mark.e2e
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
    assert _boxes(html) == _boxes(logs)
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
    boxes = _boxes(html)
    assert boxes[0][:2] == ("act", "COLLECTIVES")
    box = boxes[0][2] + boxes[0][3]
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
    boxes = _boxes(html)
    assert boxes[0][:2] == ("act", "UNFINISHED COMPILE")
    box = boxes[0][2] + boxes[0][3]
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


# ------------------------------------------------------------------ the pictures on real runs
def _svg(html: str, svg_id: str) -> str:
    start = html.index(f'<svg id="{svg_id}"')
    return html[start : html.index("</svg>", start)]


DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def _advances(ttf: Path) -> tuple[dict[int, int], int]:
    """(code point -> advance width in font units, units per em) of a TrueType font, read from its
    own `cmap` (format 4), `hmtx`, `hhea` and `head` tables: an oracle independent of page.text_px."""
    import struct

    data = ttf.read_bytes()
    n = struct.unpack(">H", data[4:6])[0]
    tables = {data[12 + 16 * i : 16 + 16 * i].decode("latin-1"): struct.unpack(">II", data[20 + 16 * i : 28 + 16 * i])
              for i in range(n)}
    head, _ = tables["head"]
    units = struct.unpack(">H", data[head + 18 : head + 20])[0]
    hhea, _ = tables["hhea"]
    n_metrics = struct.unpack(">H", data[hhea + 34 : hhea + 36])[0]
    hmtx, _ = tables["hmtx"]
    adv = [struct.unpack(">H", data[hmtx + 4 * i : hmtx + 4 * i + 2])[0] for i in range(n_metrics)]
    cmap, _ = tables["cmap"]
    sub = None
    for i in range(struct.unpack(">H", data[cmap + 2 : cmap + 4])[0]):
        pid, eid, off = struct.unpack(">HHI", data[cmap + 4 + 8 * i : cmap + 12 + 8 * i])
        if (pid, eid) in ((3, 1), (0, 3)) and struct.unpack(">H", data[cmap + off : cmap + off + 2])[0] == 4:
            sub = cmap + off
            break
    assert sub is not None
    segs = struct.unpack(">H", data[sub + 6 : sub + 8])[0] // 2
    arr = [struct.unpack(f">{segs}H", data[sub + 14 + k * 2 * segs + (2 if k else 0) : sub + 14 + (k + 1) * 2 * segs + (2 if k else 0)])
           for k in range(4)]
    ends, starts, deltas, ranges = arr
    ro_base = sub + 16 + 6 * segs
    out: dict[int, int] = {}
    for s_i in range(segs):
        for c in range(starts[s_i], min(ends[s_i], 0x2FFF) + 1):
            if ranges[s_i] == 0:
                g = (c + deltas[s_i]) & 0xFFFF
            else:
                at = ro_base + 2 * s_i + ranges[s_i] + 2 * (c - starts[s_i])
                g = struct.unpack(">H", data[at : at + 2])[0]
                g = (g + deltas[s_i]) & 0xFFFF if g else 0
            out[c] = adv[min(g, n_metrics - 1)]
    return out, units


def _font_px(text: str, font: tuple[dict[int, int], int], size: float = 11.0) -> float:
    widths, units = font
    return sum(widths.get(ord(ch), units) for ch in text) * size / units


@pytest.mark.skipif(not DEJAVU.is_file(), reason="needs DejaVu Sans (Debian's fonts-dejavu-core)")
def test_picture_labels_fit_their_columns() -> None:
    """Each label of the timeline, compile time by function and the grid fits the column it
    is drawn in (it was cut: "process without a r…"), in DejaVu Sans at 11 px, the widest of the
    usual sans-serif fonts, measured from the font file; one longer than LABEL_MAX_PX is cut in
    its middle, all of it in the tooltip. (test_browser_labels_are_not_cut checks Chromium's own
    layout.)"""
    font = _advances(DEJAVU)
    assert _font_px("m", font) > _font_px("i", font) > 0  # the table reads as a proportional font
    for trace in (traceview.load(MULTIRANK), traceview.load(AOTI)):
        html = page.render_page(trace)
        for svg_id, cls in (("timeline", "lane"), ("functions", "flabel"), ("grid", "glabel")):
            if f'<svg id="{svg_id}"' not in html:
                continue
            svg = _svg(html, svg_id)
            col = float(re.search(r'data-label-w="([\d.]+)"', svg).group(1))
            labels = [unescape(re.sub(r"<title>.*?</title>", "", x)) for x in re.findall(rf'<text class="{cls}"[^>]*>(.*?)</text>', svg)]
            assert labels, svg_id
            for label in labels:
                # measured with the font's own advance widths, not the function that sized the column
                assert _font_px(label, font) + 2 <= col, (svg_id, label, col)
    assert "process without a rank</text>" in _svg(page.render_page(traceview.load(AOTI)), "timeline")
    long = "torch_dynamo_resume_in_forward_at_123 " * 6
    cut = page.fit_label(long)
    assert cut != long and "…" in cut and _font_px(cut, font) <= page.LABEL_MAX_PX
    assert cut.startswith("torch_dynamo_resume_in_forward") and cut.endswith(long.rstrip()[-8:] + " ")


def test_grid_rows_are_named_compiles_and_columns_ranks() -> None:
    html = page.render_page(traceview.load(MULTIRANK))
    grid = _svg(html, "grid")
    rows = [unescape(x) for x in re.findall(r'<text class="glabel"[^>]*><title>[^<]*</title>([^<]*)</text>', grid)]
    assert rows == [
        "[0/0] TinyNet.forward (multirank.py:31)", "[0/1] TinyNet.forward (multirank.py:31)",
        "[1/0] report (multirank.py:35)", "[2/0] torch_dynamo_resume_in_report_at_37 (multirank.py:37)",
    ]
    assert re.findall(r'<g class="rank[^"]*" data-rank="(\d+)"', grid) == ["0", "1"]
    # [0/1] only on rank 1: rank 0's cell is white, rank 1's links to its compile and is outlined
    row = grid[grid.index('data-cid="0/1"') :]
    row = row[: row.index("</g>")]
    assert re.findall(r'class="cell st-(\w+)( odd)?"', row) == [("missing", ""), ("finished", " odd")]
    assert 'href="#c1-0-1-1"' in row and 'href="#q=%5B0/1%5D"' in row
    cell = re.search(r'<rect class="cell[^>]*width="(\d+)" height="(\d+)"', grid)
    assert int(cell.group(1)) >= 14 and int(cell.group(2)) >= 14  # big enough to see and to click


def test_grid_of_48_ranks_fits_the_page_width() -> None:
    """Built from the report of 48 ranks (as the benchmark's rank48 inputs): 48 rank columns
    with their numbers upright; the grid is not wider than the page (1280 px of content)."""
    report = {"ranks": list(range(48)), "rank_divergence": [{"rank": 5, "detail": "compiles 0/2 missing", "extra_compile_ids": []}]}
    comps = page._Compiles([
        {"rank": r, "compile_id": cid, "status": "ok", "anchor": f"c{r}-{cid}", "function": "forward",
         "filename": "/x/model.py", "line": 10}
        for r in range(48) for cid in ("0/0", "0/1", "1/0") if not (r == 5 and cid == "0/1")
    ])
    grid = page._grid(report, comps, page._where)
    assert [c["rank"] for c in grid["cols"]] == list(range(48)) and not grid["rotate"]
    assert grid["width"] <= 1280
    assert [c["divergent"] for c in grid["cols"]].count(True) == 1
    assert grid["rows"][1]["cells"][5]["status"] == "missing"
    assert [r["label"] for r in grid["rows"]] == ["[0/0] forward (model.py:10)", "[0/1] forward (model.py:10)", "[1/0] forward (model.py:10)"]


def test_aotinductor_compile_is_named() -> None:
    """A compile without a Dynamo frame (torch.export + AOTInductor) is named as the summary
    names it (parsers.frameless), not "?"."""
    trace = traceview.load(AOTI)
    assert "[unknown_3013] AOTInductor compile" in render_text(build_report(trace))
    html = page.render_page(trace)
    assert "] ?" not in html and ">?<" not in html
    tip = re.search(r"<title>(\[unknown_3013\][^<]*)</title>", _svg(html, "timeline")).group(1)
    assert tip.startswith("[unknown_3013] AOTInductor compile: forward ")
    assert re.search(r'<summary class="mono">\[unknown_3013\] AOTInductor compile ', html)
    assert "aotinductor compile" in re.search(r'data-k="([^"]*)"', html).group(1)


def test_collective_mismatch_schedules_are_drawn() -> None:
    """fixtures/gpu/funcol_extra_allreduce (2 NCCL ranks): rank 1's step issues a second
    all_reduce rank 0 does not. The picture: both schedules side by side, collective 2 marked
    on rank 1 and empty on rank 0."""
    html = page.render_page(traceview.load(FUNCOL_EXTRA))
    [fig] = re.findall(r'<figure class="sched">(.*?)</figure>', html, re.S)
    assert "[0/0] step (funcol_extra_allreduce.py:30): collective 2 differs" in fig
    heads = re.findall(r'<div class="sched-head"><a href="#([^"]+)">([^<]+)</a> <span class="note">([^<]+)</span>', fig)
    assert heads == [("c1-0-0-1", "rank 1 [0/0]", "2 collectives"), ("c0-0-0-1", "rank 0 [0/0]", "1 collective")]
    cells = [(cls, unescape(re.sub(r"<[^>]+>", "", body)).strip())
             for cls, body in re.findall(r'<div class="coll (\w+)">(.*?)</div>', fig)]
    assert cells == [
        ("same", "all_reduce float32[32, 128]"), ("same", "all_reduce float32[32, 128]"),
        ("differs", "all_reduce float32[32, 128] ← no partner"), ("absent", "none issued"),
    ]
    assert html.index('id="schedules"') < html.index('<svg id="timeline"')
    # no mismatch, no picture
    assert '<figure class="sched">' not in page.render_page(traceview.load(MULTIRANK))


@pytest.mark.e2e
def test_browser_labels_are_not_cut(tmp_path: Path) -> None:
    """In Chromium: every label's box starts inside the picture and ends before the bars."""
    html = page.render_page(traceview.load(MULTIRANK))
    probe = """<script>
    var out = [];
    [["timeline", "lane"], ["functions", "flabel"], ["grid", "glabel"]].forEach(function (p) {
      var svg = document.getElementById(p[0]), col = parseFloat(svg.getAttribute("data-label-w"));
      svg.querySelectorAll("text." + p[1]).forEach(function (t) {
        var b = t.getBBox(); out.push([p[0], Math.round(b.x), Math.round(b.x + b.width), col]);
      });
    });
    var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
    </script></body>"""
    f = tmp_path / "p.html"
    f.write_text(html.replace("</body>", probe))
    r = _chromium(["--dump-dom"], f.as_uri(), tmp_path)
    assert not _console_errors(r.stderr), r.stderr[-2000:]
    import json

    boxes = json.loads(unescape(re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, re.S).group(1)))
    assert {b[0] for b in boxes} == {"timeline", "functions", "grid"}
    for svg_id, x0, x1, col in boxes:
        assert x0 >= 0 and x1 <= col, (svg_id, x0, x1, col)


@pytest.mark.parametrize("run", ["corpus/multirank4", "gpu/oom_compiled", "gpu/ddp2_buckets"])
def test_the_pages_head_is_the_summarys(run: str) -> None:
    # issue 44.10: the head line is computed once (the report's `head`); the page prints the
    # summary's title and that head, line for line, on a stall, an OOM crash and DDP's own breaks
    trace = traceview.load(FIXTURES / run)
    report = build_report(trace)
    head = re.search(r'<div class="head" id="findings"><pre>(.*?)</pre></div>', page.render_page(trace, report), re.S)
    assert head is not None
    text = render_text(report, width=10_000).splitlines()
    # (a compile named in a head line is a link to it: the words are the summary's)
    plain = re.sub(r"</?a\b[^>]*>", "", head.group(1))
    assert [unescape(x) for x in plain.strip("\n").splitlines()] == [text[0], *report["head"]]
    assert text[2 : 2 + len(report["head"])] == report["head"]


# ------------------------------------------------------------------ unfinished compiles: pictures that show the stop
STOPS = {
    "stop_hang_behind_rank": FIXTURES / "stop_hang_behind_rank",
    "stop_backward_compiling": FIXTURES / "stop_backward_compiling",
    "stop_killed_in_codegen": FIXTURES / "stop_killed_in_codegen",
    "ddp_rank_recompile": FIXTURES / "corpus" / "ddp_rank_recompile",
}
_STAMP = re.compile(r"^[VIWEF](\d{4} \d\d:\d\d:\d\d\.\d{6}) ", re.M)


def _torch_records(run: Path, kind: str) -> dict[tuple[int, str], list[dict]]:
    """(rank, "frame/compile") -> the `kind` records (compilation_metrics,
    bwd_compilation_metrics) torch wrote, in log order, read from the raw trace files."""
    import gzip
    import json

    out: dict[tuple[int, str], list[dict]] = {}
    for f in sorted((run / "trace").iterdir()):
        with (gzip.open(f, "rt") if f.suffix == ".gz" else f.open()) as fh:
            for line in fh:
                if f'] {{"{kind}": ' in line:
                    rec = json.loads(line[line.index("] {") + 2 :])
                    out.setdefault((rec["rank"], f"{rec['frame_id']}/{rec['frame_compile_id']}"), []).append(rec[kind])
    return out


def _last_stamp(run: Path) -> str:
    """The capture's last timestamp as torch's glog prefix writes it ("1128 12:15:57.005000"),
    over the text log and every trace file."""
    import gzip

    texts = [(run / "torch_logs.txt").read_text(errors="replace")]
    for f in (run / "trace").iterdir():
        with (gzip.open(f, "rt") if f.suffix == ".gz" else f.open()) as fh:
            texts.append(fh.read())
    return max(s for t in texts for s in _STAMP.findall(t))


_BAR = re.compile(
    r'<g class="(bar|bwd)([^"]*)" data-cid="([^"]*)" data-rank="([^"]*)" data-piece="([^"]*)" data-index="(\d+)" '
    r'data-status="([^"]*)" data-seconds="([^"]*)"><title>([^<]*)</title>(.*?)</g>', re.S)


def _timeline_bars(html: str) -> list[dict]:
    """Each bar of the page's timeline: its piece, status, seconds, tooltip and where it ends (px)."""
    out = []
    for kind, cls, cid, rank, piece, index, status, secs, tip, body in _BAR.findall(_svg(html, "timeline")):
        rects = [(float(x), float(w)) for x, w in re.findall(r'<rect class="ph-[^"]*" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', body)]
        mark = re.search(r'<text class="open-mark"[^>]*>([^<]*)</text>', body)
        out.append({"kind": kind, "classes": cls.split(), "cid": cid, "rank": int(rank), "piece": piece, "index": int(index),
                    "status": status, "seconds": float(secs) if secs else None, "tip": unescape(tip),
                    "x0": min(x for x, _ in rects), "x1": max(x + w for x, w in rects), "mark": unescape(mark.group(1)) if mark else None})
    return out


def _end_line(html: str) -> tuple[str, float]:
    m = re.search(r'<line class="(end-line[^"]*)" x1="([\d.]+)"', _svg(html, "timeline"))
    return m.group(1), float(m.group(2))


def _states(html: str) -> list[str]:
    return [unescape(x) for x in re.findall(r'<text class="state"[^>]*><title>[^<]*</title>([^<]*)</text>', _svg(html, "timeline"))]


@pytest.fixture(scope="module")
def stop_pages() -> dict[str, str]:
    return {name: page.render_page(traceview.load(run)) for name, run in STOPS.items()}


@pytest.mark.parametrize("name", list(STOPS))
def test_timeline_draws_every_piece_as_torch_timed_it(stop_pages: dict[str, str], name: str) -> None:
    """Every piece of every compile is a bar with the status and seconds torch's own records
    give: a finished forward its compilation_metrics' entire_frame_compile_time_s, each
    backward piece its bwd_compilation_metrics' end - start (DDPOptimizer: one per bucket); a
    piece left open is marked and ends on the line of the capture's end."""
    html = stop_pages[name]
    run = STOPS[name]
    fwd, bwd = _torch_records(run, "compilation_metrics"), _torch_records(run, "bwd_compilation_metrics")
    bars = _timeline_bars(html)
    cls, end_x = _end_line(html)
    assert cls == ("end-line" if name == "ddp_rank_recompile" else "end-line ended")
    assert max(b["x1"] for b in bars) <= end_x + 0.2
    seen: dict[tuple[int, str], list[dict]] = {}
    for b in bars:
        seen.setdefault((b["rank"], b["cid"]), []).append(b)
        if b["status"] in ("interrupted", "never_ended"):
            assert "open" in b["classes"] and abs(b["x1"] - end_x) <= 0.2, b
            assert "interrupted when the job ended" in b["tip"] and "s to the capture's end" in b["tip"]
            continue
        assert b["status"] == "finished" and "open" not in b["classes"], b
        if b["piece"] == "forward":
            [m] = fwd[(b["rank"], b["cid"])]
            assert b["seconds"] == pytest.approx(m["entire_frame_compile_time_s"], abs=1e-6), b
        else:
            p = bwd[(b["rank"], b["cid"])][b["index"]]
            assert b["seconds"] == pytest.approx((p["end_time_us"] - p["start_time_us"]) / 1e6, abs=1e-6), b
    # no piece torch logged is missing, and each compile's backward pieces are all drawn
    for key, recs in bwd.items():
        assert sorted(b["index"] for b in seen[key] if b["piece"] == "backward" and b["status"] == "finished") == list(range(len(recs)))
    assert {k for k in fwd} <= set(seen)


def test_hung_rank_runs_to_the_stop_and_the_waiting_rank_says_so(stop_pages: dict[str, str]) -> None:
    """fixtures/stop_hang_behind_rank: rank 1 hangs in [4/1]'s code_gen until timeout's SIGTERM;
    rank 0 finished [4/1] (forward and backward) and waits. Rank 1's bar runs from its
    dynamo_start to the capture's last timestamp (58.389 s), marked; the rows end with each
    rank's state then; nothing about [4/1] on rank 1 says finished or ok."""
    html = stop_pages["stop_hang_behind_rank"]
    bars = _timeline_bars(html)
    [hung] = [b for b in bars if b["rank"] == 1 and b["cid"] == "4/1"]
    assert (hung["piece"], hung["status"], hung["seconds"]) == ("forward", "interrupted", 58.389)
    assert hung["mark"] == "interrupted when the job ended (in inductor code_gen)"
    assert hung["tip"].startswith("rank 1 [4/1] MLP.forward (hang_behind_rank.py:42): forward interrupted when the job ended (in inductor code_gen): "
                                  "58.389s to the capture's end")
    assert "Sending process 29353 closing signal SIGTERM" in hung["tip"]
    # the hung bar is the last thing on the axis: it ends where the job did
    assert hung["x1"] == pytest.approx(_end_line(html)[1], abs=0.2) and hung["x1"] == max(b["x1"] for b in bars)
    # rank 0 finished [4/1] in 1.18 s and its backward in 1.66 s
    assert [(b["piece"], b["status"], b["seconds"]) for b in bars if b["rank"] == 0 and b["cid"] == "4/1"] == [
        ("forward", "finished", 1.180718), ("backward", "finished", 1.659482)]
    assert _states(html) == ["waiting for rank 1 (likely)", "compiling [4/1] (in inductor code_gen)"]
    # 58.389 s is torch's own clock: from rank 1's dynamo_start of [4/1] to the launcher's last line
    assert _last_stamp(STOPS["stop_hang_behind_rank"]) == "1128 12:15:57.005000"
    summary = re.search(r'id="c1-4-1-1"[^>]*>\n<summary class="mono">(.*?)</summary>', html).group(1)
    assert re.sub(r"<[^>]+>", "", unescape(summary)).endswith(
        "— interrupted when the job ended (in inductor code_gen), 58.389s up to the capture's end")
    grid = _svg(html, "grid")
    row = grid[grid.index('data-cid="4/1"') :]
    assert re.findall(r'class="cell st-(\w+)', row[: row.index("</g>")]) == ["finished", "interrupted"]


def test_interrupted_backward_is_drawn_and_never_ok(stop_pages: dict[str, str]) -> None:
    """fixtures/stop_backward_compiling: both ranks' forward finished (78.8 s), their backward
    was stopped in code_gen by timeout's SIGTERM. The backward is a bar from its first record to
    the stop (not "backward 0.000s"), the compile's line says interrupted with the account's
    seconds (forward and the open backward), the grid's cells are unfinished, not ok."""
    html = stop_pages["stop_backward_compiling"]
    bars = _timeline_bars(html)
    assert [(b["rank"], b["piece"], b["status"]) for b in sorted(bars, key=lambda b: (b["rank"], b["x0"]))] == [
        (0, "forward", "finished"), (0, "backward", "interrupted"), (1, "forward", "finished"), (1, "backward", "interrupted")]
    back = {b["rank"]: b for b in bars if b["piece"] == "backward"}
    assert back[0]["seconds"] == 38.426328 and back[1]["seconds"] == 38.625526  # to the SIGTERM line, 23:36:41.994
    assert back[0]["mark"].startswith("interrupted") and "inductor code_gen" in back[0]["mark"]
    assert back[0]["tip"].startswith("rank 0 [0/0] MLP.forward (stops_torchrun.py:54): backward interrupted when the job ended "
                                     "(in inductor code_gen): 38.426s to the capture's end (the compile: 117.193s up to")
    lines = [re.sub(r"<[^>]+>", "", unescape(x)) for x in re.findall(r'<summary class="mono">(.*?)</summary>', html)]
    assert [x.split(" — ")[1] for x in lines] == [
        "interrupted when the job ended (backward, in inductor code_gen), 117.193s up to the capture's end",
        "interrupted when the job ended (backward, in inductor code_gen), 117.231s up to the capture's end",
    ]
    assert re.findall(r'class="cell st-(\w+)', _svg(html, "grid")) == ["interrupted", "interrupted"]
    assert _states(html) == ["compiling [0/0] (backward, in inductor code_gen)"] * 2


def test_nothing_unfinished_is_labelled_ok(stop_pages: dict[str, str]) -> None:
    for name, html in stop_pages.items():
        assert "st-ok" not in html and " — <span class=\"st\">ok" not in html, name
        for cls, status, text in re.findall(
                r'<details class="compile([^"]*)" id="[^"]+" data-k="[^"]*" data-blobs="[^"]*" data-status="([^"]*)">\n'
                r'<summary class="mono">.*?<span class="st">([^<]*)</span>', html):
            if status in ("interrupted", "never_ended"):
                assert "open" in cls and unescape(text).startswith("interrupted when the job ended"), (name, text)
            else:
                assert status == "finished" and unescape(text).startswith("finished"), (name, status, text)


@pytest.mark.e2e
def test_browser_draws_the_hang_to_the_stop(stop_pages: dict[str, str], tmp_path: Path) -> None:
    """In Chromium, fixtures/stop_hang_behind_rank: the hung bar's box ends on the stop's line,
    its words sit inside it, and each rank's state after its row is inside the picture."""
    probe = """<script>
    var svg = document.getElementById("timeline"), out = {};
    var line = svg.querySelector("line.end-line"), bar = svg.querySelector("g.open");
    var b = bar.getBBox(), m = bar.querySelector("text.open-mark").getBBox();
    out.line = parseFloat(line.getAttribute("x1")); out.bar = [b.x, b.x + b.width]; out.mark = [m.x, m.x + m.width];
    out.width = parseFloat(svg.getAttribute("width"));
    out.states = Array.prototype.map.call(svg.querySelectorAll("text.state"), function (t) { var s = t.getBBox(); return [s.x, s.x + s.width]; });
    var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
    </script></body>"""
    f = tmp_path / "hang.html"
    f.write_text(stop_pages["stop_hang_behind_rank"].replace("</body>", probe))
    r = _chromium(["--dump-dom"], f.as_uri(), tmp_path)
    assert not _console_errors(r.stderr), r.stderr[-2000:]
    import json

    got = json.loads(unescape(re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, re.S).group(1)))
    # the bar's box takes in its dashed outline (1.5 px): its right edge is on the line
    assert abs(got["bar"][1] - got["line"]) <= 1.5
    assert got["bar"][0] <= got["mark"][0] and got["mark"][1] <= got["bar"][1]
    assert len(got["states"]) == 2 and all(got["line"] < x0 and x1 <= got["width"] for x0, x1 in got["states"])
    shot = tmp_path / "hang.png"
    _chromium([f"--screenshot={shot}", "--window-size=1280,1600"], f.as_uri(), tmp_path)
    assert _png_pixels_vary(shot.read_bytes())


def _runs() -> list[Path]:
    from tests.conftest import SHARED

    corpus = FIXTURES / "corpus"
    return sorted(
        [p for p in FIXTURES.iterdir() if (p / "trace").is_dir()] + [p for p in corpus.iterdir() if (p / "trace").is_dir()]
        + [p for p in (SHARED / "gpu").glob("*") if (p / "trace").is_dir()]
        + [p for p in (SHARED / "peer-tlparse").glob("multi_rank_*") if p.is_dir()])


@pytest.mark.e2e
@pytest.mark.parametrize("path", _runs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_page_data_is_the_compile_account_on_every_run(path: Path) -> None:
    """On every real run: the page's compile list shows each compile with the account's status
    and seconds, and its timeline one bar per piece of the account with the piece's status and
    seconds, open pieces ending on the capture's-end line (one story in every view)."""
    from traceview.analyze.accounts.compiles import OPEN, compile_account, compile_pieces

    t = traceview.load(path)
    html = page.render_page(t)
    comps = page._compiles(t)
    where = {r["anchor"]: (r["file"], r["compile_id"], r["occurrence"] or 1) for r in comps.rows}
    acc = {(r["file"], r["compile_id"], r["occurrence"] or 1): r
           for r in compile_account(t).filter(pl.col("compile_id").is_not_null()).iter_rows(named=True)}
    listed = re.findall(r'<details class="compile[^"]*" id="([^"]+)" data-k="[^"]*" data-blobs="[^"]*" data-status="([^"]*)">\n'
                        r'<summary class="mono">.*?<span class="st">([^<]*)</span>', html)
    assert sorted(where[a] for a, _, _ in listed) == sorted(acc)
    for a, status, text in listed:
        r = acc[where[a]]
        assert status == r["status"], (a, status, r["status"])
        if r["seconds"] is not None and r["status"] != "unknown":
            assert f"{r['seconds']:.3f}s" in text, (a, text)
        if r["status"] in OPEN:
            assert unescape(text).endswith("up to the capture's end"), (a, text)
    if '<svg id="timeline"' not in html:
        return
    pieces: dict[tuple, list[tuple]] = {}
    for r in compile_pieces(t).filter(pl.col("start").is_not_null()).iter_rows(named=True):
        pieces.setdefault((r["file"], r["compile_id"], r["occurrence"] or 1), []).append(
            (r["piece"], r["index"], r["status"], None if r["seconds"] is None else round(r["seconds"], 6)))
    drawn: dict[tuple, list[tuple]] = {}
    bars = re.findall(r'<a href="#([^"]+)"><g class="(?:bar|bwd)[^"]*" data-cid="[^"]*" data-rank="[^"]*" data-piece="([^"]*)" '
                      r'data-index="(\d+)" data-status="([^"]*)" data-seconds="([^"]*)">', _svg(html, "timeline"))
    for a, piece, index, status, secs in bars:
        if not secs:  # a compile with a start and no time logged: one thin bar, no piece
            assert acc[where[a]]["status"] == status and status in ("unknown", "failed") and where[a] not in pieces
            continue
        drawn.setdefault(where[a], []).append((piece, int(index), status, float(secs) if secs else None))
    assert {k: sorted(v) for k, v in drawn.items()} == {k: sorted(v) for k, v in pieces.items()}
