"""Message parsing takes time linear in the text, whatever the text (issue 14, item 1).

Each regex that was quadratic (a `search` or lazy quantifier that starts over at each
position of a long run) is tested two ways: (1) on an adversarial input of about a megabyte,
for which the old regex needed hours (16 KB already took seconds: the work grows with the
square of the length); the test has no timing assert, only a generous deadline that turns a
regression into a failure instead of a hung CI job; (2) against the old regex, kept here as
the specification, on generated short texts and on every line of the real traces, so that the
linear version finds exactly what the regex found.

The inputs are hand-made (log text is data: an attacker or a runaway repr controls it).
"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import lexing, messages, outputcode
from parsers.fxgraph import reference

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20


@contextlib.contextmanager
def deadline(seconds: int = 120) -> Iterator[None]:
    """Fail (instead of hanging) when the block runs past `seconds`: ~100x what the linear
    code needs on the slowest machine we run on, a small fraction of what a quadratic
    regex needs on these inputs."""

    def expire(signum, frame):
        raise AssertionError(f"still running after {seconds} s: not linear time")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- the old regexes (specs)

OLD_GUARD_COMMENT = re.compile(
    r"^(?P<code>.*?)\s+# (?:(?P<ucode>.*?)  # )?(?P<ufile>\S+?):(?P<uline>\d+) in (?P<ufn>\S+)"
    r"(?: \(HINT: (?P<hint>.*)\)| \((?P<note>.*)\))?\s*$",
    re.S,
)
OLD_SYM = re.compile(r"(?P<src>[\w'\[\]\.]+?)\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]")
OLD_STACK = re.compile(
    r"(?:^|\s)File: (?P<file>.+?):(?P<line>\d+)(?: in (?P<fn>.+?))?, code: (?P<code>.*)$"
)
OLD_PARAM = re.compile(
    r'^(?P<name>\*{0,2}[A-Za-z_]\w*)(?:\s*:\s*(?:"(?P<qann>(?:[^"\\]|\\.)*)"|(?P<ann>[^=]+?)))?'
    r"(?:\s*=\s*(?P<default>.+))?$"
)
OLD_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", re.S)
OLD_LAUNCH = re.compile(r"^\s*(?:[\w, ]+ = )?(?P<name>[A-Za-z_]\w*)(?P<run>\.run)?\(")
OLD_EXTERN = re.compile(
    r"^\s*(?:[\w, ]+ = )?(?P<fn>extern_kernels\.\w+|torch\.ops\.[\w.]+|aten\.[\w.]+|"
    r"inductor_ops\.[\w.]+|_quantized\.[\w.]+)\("
)


def old_split(text: str) -> tuple:
    m = OLD_GUARD_COMMENT.match(text)
    if not m:
        return (text.rstrip(), None, None, None, None, None)
    # a note in parentheses (a range guard's) is the hint, unless it is torch's own frame
    note = m["note"] if m["note"] is not None and not re.fullmatch(r"\S+\.py:\d+ in \S+", m["note"]) else None
    return (m["code"].rstrip(), m["ucode"], m["ufile"], int(m["uline"]), m["ufn"], m["hint"] if m["hint"] is not None else note)


def new_split(text: str) -> tuple:
    d = messages.split_guard_comment(text)
    return (d["code"], d["user_code"], d["user_file"], d["user_line"], d["user_function"], d["hint"])


def old_sym(g: str) -> tuple | None:
    m = OLD_SYM.search(g)
    return (m["src"], m["what"], m["dim"]) if m else None


def old_stack(c: str) -> tuple | None:
    m = OLD_STACK.search(c)
    return (m.start(), m["file"], m["line"], m["fn"], m["code"]) if m else None


def old_param(p: str) -> tuple | None:
    m = OLD_PARAM.match(p.strip())
    if not m:
        return None
    ann = m["qann"] if m["qann"] is not None else m["ann"]
    return m["name"], (ann.strip() if ann is not None else None), m["default"]


def quotes_left(pattern: re.Pattern[str], repl, s: str) -> tuple[bool, str]:
    t = pattern.sub(repl, s)
    return ('"' in t or "'" in t), t


def groups(m: re.Match[str] | None) -> dict | None:
    return m.groupdict() if m else None


# -------------------------------------------------------------- (1) adversarial inputs


def test_failed_guard_of_a_long_identifier_run() -> None:
    """The reproducer: a `[__recompiles]` line of 64 KB of `x` took 44 s (2 GB for 100 MB)."""
    with deadline():
        rows = messages.parse_recompile_reasons("x" * (4 * MB))
        classified = messages.classify_guard("L['x']" * MB + ".size()[0] == 3")
    assert [r["kind"] for r in rows] == ["other"]
    # parsed on its first MESSAGE_MAX characters (the event keeps the whole payload)
    assert rows[0]["guard"] == "x" * messages.MESSAGE_MAX
    # classified on its first CLASSIFY_MAX characters: no `.size()[` there
    assert classified["kind"] == "other"
    assert messages.classify_guard("L['x']" * 10 + ".size()[1] == 3")["guard_source"] == "L['x']" * 10


def test_guard_comment_on_many_separators() -> None:
    with deadline():
        a = messages.split_guard_comment("  # " * (MB // 4))
        b = messages.split_guard_comment(" # a:1 in f (HINT: " * (MB // 19) + ")")
        c = messages.split_guard_comment("x" + "  # a.py:1 in" * (MB // 13) + "  # a.py:3 in f")
    assert a["user_file"] is None and a["code"] == ("  # " * (MB // 4)).rstrip()
    assert b["user_file"] == "a" and b["hint"] is not None
    assert (c["code"], c["user_file"], c["user_line"], c["user_function"]) == ("x", "a.py", 3, "f")


def test_recompile_reason_with_many_guards_is_bounded() -> None:
    with deadline():
        rows = messages.parse_recompile_reasons("a == 1; " * MB)
    # parsed on its first MESSAGE_MAX characters
    assert 0 < len(rows) <= messages.MESSAGE_MAX // 8 + 1
    assert {r["kind"] for r in rows} == {"value"}


def test_stack_comment_on_many_file_markers() -> None:
    with deadline():
        a = reference.find_stack("File: " * (MB // 6))
        b = reference.find_stack("File: x" + ":1 in a" * (MB // 7))
        c = reference.find_stack("File: x" + ":1 in a, code: " * (MB // 14))
    assert a is None and b is None
    assert c is not None and c[1:4] == ("x", "1", "a")


def test_param_with_a_long_whitespace_run() -> None:
    with deadline():
        got = lexing.parse_param("a: x" + " " * (4 * MB) + "y")
    assert got == ("a", "x" + " " * (4 * MB) + "y", None)


def test_unterminated_quotes() -> None:
    s = "'\\" * (2 * MB)
    with deadline():
        left, _ = quotes_left(lexing.QUOTED, lexing.unquote, s)
        lexing.balance("(" + s)
    assert left  # the caller then falls back to its character walk, as before


def test_kernel_launch_lines_with_long_indents() -> None:
    with deadline():
        assert outputcode._LAUNCH.match(" " * (4 * MB) + "x") is None
        assert outputcode._EXTERN.match(" " * (4 * MB) + "x") is None
        assert outputcode._LAUNCH.match("a, " * MB) is None
    assert outputcode._LAUNCH.match("    buf0, buf1 = kernel.run(x)")["name"] == "kernel"


# ------------------------------------------------ (2) the same answers as the old regexes

FRAGMENTS = [
    "  # ", "# ", " # ", "a", "x.py", ":", "1", "12", " in ", "fn", " (HINT: ", ")", " ", "\n",
    "\t", ".size()[", ".stride()[", "]", "[", "'", "L", "(", "x", "File: ", ", code: ", "=",
    '"', "\\", "*", "b: ", "extern_kernels.mm", " = ", "torch.ops.aten.x", ".run", "buf0, buf1",
]
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts)
def test_same_answers_as_the_old_regexes(t: str) -> None:
    assert new_split(t) == old_split(t)
    assert messages._find_sym(t) == old_sym(t)
    assert reference.find_stack(t) == old_stack(t)
    assert lexing.parse_param(t) == old_param(t)
    old_left, old_t = quotes_left(OLD_QUOTED, "", t)
    new_left, new_t = quotes_left(lexing.QUOTED, lexing.unquote, t)
    assert old_left == new_left and (old_left or old_t == new_t)
    # (the old launch regexes also took a `=` with only spaces before it for an assignment)
    if not re.match(r"\s*(?: +)?=", t) and not re.match(r"\s* = ", t):
        assert groups(outputcode._LAUNCH.match(t)) == groups(OLD_LAUNCH.match(t))
        assert groups(outputcode._EXTERN.match(t)) == groups(OLD_EXTERN.match(t))


def _real_lines() -> list[str]:
    files = [*ROOT.glob("fixtures/*/torch_logs.txt"), *ROOT.glob("fixtures/*/trace/*.log")]
    files += sorted((ROOT.parent / "shared" / "traces" / "peer-tlparse").glob("*.log"))
    return [ln.lstrip("\t") for f in files for ln in f.read_text(errors="replace").split("\n")]


def test_same_answers_on_real_traces() -> None:
    checked = 0
    for line in _real_lines():
        if "#" in line or ".size()" in line or ".stride()" in line:
            assert new_split(line) == old_split(line), line
            assert messages._find_sym(line) == old_sym(line), line
            checked += 1
        if "File: " in line:
            comment = line.split("#", 1)[-1]
            assert reference.find_stack(comment) == old_stack(comment), line
        assert groups(outputcode._LAUNCH.match(line)) == groups(OLD_LAUNCH.match(line)), line
        assert groups(outputcode._EXTERN.match(line)) == groups(OLD_EXTERN.match(line)), line
    assert checked > 500  # the fixtures have guard trees and recompile reasons


def test_glog_rank_prefix_on_a_long_digit_run() -> None:
    """A line that starts like a rank prefix, `[a` + a megabyte of digits: the rank pattern
    (parsers.glog.RANK, `[<role><digits>]:`) read it in quadratic time while a role could hold
    digits too (8,000 digits took 0.85 s); a role is letters only now. Also read through the
    text-log reader, which matches every line against the prefix."""
    from parsers.glog import HEAD, PREFIX

    line = "[a" + "1" * MB + "x"
    with deadline():
        assert re.match("^" + PREFIX, line) is None
        assert re.match("^" + HEAD, "[default" + "1" * MB + "]:I1123 11:57:52.767000") is not None


def test_glog_rank_prefix_through_the_text_log_reader(tmp_path: Path) -> None:
    # hand-made lines (log text is data): a megabyte-long would-be prefix, then a real record
    from parsers.textlog import read_text_log

    f = tmp_path / "log.txt"
    f.write_text("[a" + "1" * MB + "x\n" + "[default1]:I1123 11:57:52.767000 30233 torch/_dynamo/x.py:1] [0/0] hello\n")
    with deadline():
        tl = read_text_log(f)
    assert tl.records.select("rank", "compile_id", "text").rows() == [(1, "0/0", "hello")]
