"""Parse torch.compile message bodies that are the same text in TORCH_TRACE and TORCH_LOGS.

* graph-break text: trace ``dynamo_graph_break_reason`` payload / text ``graph_breaks``;
* recompile reasons: trace ``recompile_reasons`` payload / text ``recompiles(_verbose)``;
* guard tree: trace ``dynamo_cpp_guards_str`` payload / text ``guards``;
* seq_nr annotations: text ``annotation`` records.

Pure functions, one message at a time (records are few); no polars here.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from parsers.lexing import split_top_level

__all__ = [
    "classify_guard",
    "parse_annotation",
    "parse_graph_break",
    "parse_guard_tree",
    "parse_reason",
    "parse_recompile_reasons",
    "split_graph_breaks",
    "split_guard_comment",
]

# ---------------------------------------------------------------- graph breaks

_GB_HEADER = re.compile(
    r"^Graph break (?P<suppressed>\(user stack suppressed due to duplicate graph break\) )?"
    r"in user code at (?P<file>.+):(?P<line>\d+)\s*$"
)
_GB_REASON = "Graph Break Reason: "
_GB_NESTED = "*** While handling this graph break, another graph break occurred: ***"
_GB_SKIP = "Skipping the function and falling back to eager"
_GB_URL = re.compile(r"/gb/(gb\d+)\.html")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<fn>.+))?$')
_FRAME_SKIPPED = re.compile(r"frame skipped: (?P<fn>\S+) \((?P<file>.+) line (?P<line>\d+)\)")


_GB_ID = re.compile(r"\b(gb\d{4})\b")


def parse_reason(text: str | None) -> dict[str, Any]:
    """Title (`reason`), gb id, hints and explanation of a graph-break or failure message as
    `compilation_metrics` carries it (a restart reason, a fail_reason): not the full message
    of parse_graph_break, which these have no header for."""
    lines = [s.strip() for s in (text or "").split("\n")]
    title = next((s for s in lines if s), "")
    if len(title) > 1 and title[0] == title[-1] and title[0] in "'\"":
        title = title[1:-1]
    m = _GB_ID.search(text or "")
    hints = [s[len("Hint:") :].strip() for s in lines if s.startswith("Hint:")]
    expl = next((s[len("Explanation:") :].strip() for s in lines if s.startswith("Explanation:")), None)
    return {
        "reason": title or None,
        "gb_id": m.group(1) if m else None,
        "hint": "\n".join(hints) or None,
        "explanation": expl or None,
    }


def split_graph_breaks(text: str) -> list[tuple[int, str]]:
    """Split a record's text into graph-break messages: (line offset, message) pairs.

    A message starts at a ``Graph break ... in user code at FILE:LINE`` header; text
    before the first header is dropped.
    """
    out: list[tuple[int, list[str]]] = []
    for i, line in enumerate(text.split("\n")):
        if _GB_HEADER.match(line):
            out.append((i, []))
        if out:
            out[-1][1].append(line)
    return [(i, "\n".join(lines)) for i, lines in out]


def _gb_section(lines: list[str]) -> dict[str, Any]:
    """Title, explanation, hints, debug context and gb id of one break section."""
    title = next((s.strip() for s in lines if s.strip()), None)
    expl: list[str] = []
    hints: list[str] = []
    debug = None
    gb_id = None
    mode = None
    for s in lines:
        st = s.strip()
        if st.startswith("Explanation:"):
            mode = "expl"
            expl.append(st[len("Explanation:") :].strip())
        elif st.startswith("Hint:"):
            mode = "hint"
            hints.append(st[len("Hint:") :].strip())
        elif st.startswith("Developer debug context:"):
            mode = None
            debug = st[len("Developer debug context:") :].strip()
        elif st.startswith("For more details about this graph break"):
            mode = None
            m = _GB_URL.search(st)
            gb_id = m.group(1) if m else gb_id
        elif mode == "expl":
            expl.append(s.rstrip())
        elif mode == "hint" and st:
            hints[-1] += "\n" + st
    explanation = "\n".join(expl).strip() or None
    return {
        "title": title,
        "explanation": explanation,
        "hint": "\n".join(hints) or None,
        "debug_context": debug,
        "gb_id": gb_id,
    }


def parse_graph_break(text: str) -> dict[str, Any]:
    """Parse one graph-break message (text-log record or trace payload).

    Keys: filename, line, function (of the user frame at the break), user_stack_suppressed,
    reason (short title), reason_line (text after ``Graph Break Reason:``), explanation, hint
    (all hints, newline-joined), debug_context, gb_id, frame_skipped, inner_reason,
    inner_gb_id, inner_explanation (nested break), skipped_function, skipped_filename,
    skipped_line (from ``frame skipped: fn (file line N)``), user_stack (list of frames).
    """
    lines = text.split("\n")
    # The trace payload appends the Python traceback; it is not part of the message.
    for i, s in enumerate(lines):
        if s.startswith("Traceback (most recent call last):"):
            lines = lines[:i]
            break
    out: dict[str, Any] = dict.fromkeys(
        (
            "filename", "line", "function", "reason", "reason_line", "explanation", "hint",
            "debug_context", "gb_id", "inner_reason", "inner_gb_id", "inner_explanation",
            "skipped_function", "skipped_filename", "skipped_line",
        )
    )
    out["user_stack_suppressed"] = False
    out["frame_skipped"] = False
    out["user_stack"] = []
    reason_at = None
    stack_at = None
    nested_at = None
    for i, s in enumerate(lines):
        m = _GB_HEADER.match(s)
        if m and out["filename"] is None:
            out["filename"] = m.group("file")
            out["line"] = int(m.group("line"))
            out["user_stack_suppressed"] = bool(m.group("suppressed"))
        elif s.startswith(_GB_REASON) and reason_at is None:
            reason_at = i
            out["reason_line"] = s[len(_GB_REASON) :].strip()
        elif s.strip() == _GB_NESTED.strip():
            nested_at = i
        elif s.startswith("User code traceback:"):
            stack_at = i
    end = stack_at if stack_at is not None else len(lines)
    # Sections end at the traceback or at "Stack variable source attribution:".
    for i in range(reason_at or 0, end):
        if lines[i].startswith("Stack variable source attribution:"):
            end = i
            break
    if reason_at is not None:
        reason_line = out["reason_line"] or ""
        outer_end = nested_at if nested_at is not None else end
        if reason_line.endswith(":") and (
            reason_at + 1 < outer_end and not lines[reason_at + 1].strip()
        ):
            sec = _gb_section(lines[reason_at + 1 : outer_end])
        else:
            # "Graph Break Reason: Data-dependent branching": the reason line is the title.
            sec = _gb_section([reason_line, *lines[reason_at + 1 : outer_end]])
        out["reason"] = sec["title"]
        out.update(
            {k: sec[k] for k in ("explanation", "hint", "debug_context", "gb_id")}
        )
        if nested_at is not None:
            inner = _gb_section(lines[nested_at + 1 : end])
            out["inner_reason"] = inner["title"]
            out["inner_gb_id"] = inner["gb_id"]
            out["inner_explanation"] = inner["explanation"]
            if inner["debug_context"]:
                out["debug_context"] = (out["debug_context"] or "") + "\n" + inner[
                    "debug_context"
                ]
        out["frame_skipped"] = _GB_SKIP in reason_line or nested_at is not None
        m = _FRAME_SKIPPED.search(out["debug_context"] or "")
        if m:
            out["skipped_function"] = m.group("fn")
            out["skipped_filename"] = m.group("file")
            out["skipped_line"] = int(m.group("line"))
    if stack_at is not None:
        frames: list[dict[str, Any]] = []
        for s in lines[stack_at + 1 :]:
            if not s.strip():
                break
            m = _FRAME.match(s)
            if m:
                frames.append(
                    {
                        "filename": m.group("file"),
                        "line": int(m.group("line")),
                        "function": m.group("fn"),
                        "code": None,
                    }
                )
            elif frames and frames[-1]["code"] is None and not set(s.strip()) <= {"^", "~"}:
                frames[-1]["code"] = s.strip()
        out["user_stack"] = frames
        at = [
            f for f in frames if f["filename"] == out["filename"] and f["line"] == out["line"]
        ]
        pick = at[-1] if at else (frames[-1] if frames and out["filename"] is None else None)
        if pick:
            out["function"] = pick["function"]
            if out["filename"] is None:
                out["filename"], out["line"] = pick["filename"], pick["line"]
    return out


# ----------------------------------------------------------- guards and reasons

# `code  # user code  # path:line in fn (HINT: ...)`; the user-code part may be missing; a
# range guard's comment ends with torch's own frame or a note in parentheses instead of a HINT.
# What the regex
#   ^(?P<code>.*?)\s+# (?:(?P<ucode>.*?)  # )?(?P<ufile>\S+?):(?P<uline>\d+) in (?P<ufn>\S+)
#   (?: \(HINT: (?P<hint>.*)\))?\s*$            (re.S)
# matches, found in linear time by _guard_comment (the regex is quadratic on many `# `).
_COMMENT_SOURCE = re.compile(r"(?P<ufile>\S+?):(?P<uline>\d+) in (?P<ufn>\S+)")
_FRAMEWORK_FRAME = re.compile(r"\S+\.py:\d+ in \S+")
# Guard text longer than this is classified on its first CLASSIFY_MAX characters (a guard on
# a huge repr, or a line that is not a guard at all).
CLASSIFY_MAX = 4096
# A recompile reason longer than this is parsed on its first MESSAGE_MAX characters (the
# events table keeps the whole payload); with it, a reason costs bounded work.
MESSAGE_MAX = 1 << 16
_TENSOR_CHECK = re.compile(
    r"^tensor '(?P<src>.+)' (?P<what>size|stride) mismatch at index (?P<dim>\d+)\. "
    r"expected (?P<exp>[^,]+), actual (?P<act>.+)$"
)
_TENSOR_SIMPLE = re.compile(
    r"^tensor '(?P<src>.+)' (?P<what>dtype|rank|requires_grad|dispatch key set) mismatch\. "
    r"expected (?:requires_grad=)?(?P<exp>.*?)(?:, actual (?P<act>.*))?$"
)
_TENSOR_OTHER = re.compile(r"^tensor '(?P<src>.+)' (?P<what>[\w ]+?) mismatch")
_DEVICE_INDEX = re.compile(
    r"device index mismatch\. Expected device index to be (?P<exp>-?\d+), but got (?P<act>-?\d+)"
)
_NOT_TENSOR = re.compile(r"expected type of '(?P<src>.+)' to be a tensor type")
_DEALLOC = re.compile(r"^Cache line invalidated because (?P<src>.+) got deallocated")
_GLOBAL_CHANGED = re.compile(r"^GLOBAL_STATE changed: ?(?P<what>.*)$")
_TYPE_ID = re.compile(
    r"^(?:not )?___check_type_id\((?P<src>.+), \d+\)(?:, type=<class '(?P<exp>[^']+)'>)?"
)
_TYPE_CALL = re.compile(r"^type\((?P<src>.+?)\) (?:is|==) (?P<exp>.+)$")
_OBJ_ID = re.compile(r"^(?:not )?___check_obj_id\((?P<src>.+), \d+\)")
# `x.size()[1]` / `L['x'].stride()[0]`: matched whole with fullmatch; found inside a longer
# guard by _find_sym (a search with this pattern is quadratic on a long run of its characters)
_SYM = re.compile(r"(?P<src>[\w'\[\]\.]+?)\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]")
_SYM_TAIL = re.compile(r"\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]")
_SYM_CHARS = re.compile(r"[\w'\[\]\.]+")
_SYM_EQ = re.compile(r"^(?P<lhs>.+?) (?P<op>==|<=|>=|<|>|!=) (?P<rhs>.+)$")
_LEN = re.compile(r"^len\((?P<src>.+)\) == (?P<exp>\d+)$")
_VALUE = re.compile(r"^(?P<src>.+?) (?:==|is) (?P<exp>.+)$")
# a tensorified Python float (torch >= 2.6): `___as_tensor(X).item() == v` is the value of X
_AS_TENSOR = re.compile(r"^___as_tensor\((?P<src>.+)\)\.item\(\) == (?P<exp>[^\s#]+)")
_NOT_SOURCE = ("___", "not ", "hasattr(", "isinstance(", "callable(", "__")


def split_guard_comment(text: str) -> dict[str, Any]:
    """Split ``code  # user code  # file:line in fn`` into code and user source parts."""
    found = _guard_comment(text)
    if found is None:
        return {
            "code": text.rstrip(), "user_code": None, "user_file": None,
            "user_line": None, "user_function": None, "hint": None,
        }
    code, ucode, m, hint = found
    return {
        "code": code.rstrip(),
        "user_code": ucode,
        "user_file": m.group("ufile"),
        "user_line": int(m.group("uline")),
        "user_function": m.group("ufn"),
        "hint": hint,
    }


def _guard_comment(text: str) -> tuple[str, str | None, re.Match[str], str | None] | None:
    """(code, user code, match of `file:line in fn`, hint) of a guard with a source comment:
    the comment is the first `# ` after whitespace whose remainder is `[ucode  # ]file:line
    in fn[ (HINT: ...)]` (first trying with the user code, the shortest one), as the
    regex in the comment above would find it, but with every position looked at a bounded
    number of times."""
    end = len(text.rstrip())  # past it only whitespace: where `\s*$` may start

    def source_at(p: int) -> tuple[re.Match[str], str | None] | None:
        m = _COMMENT_SOURCE.match(text, p)
        if m is None:
            return None
        q = m.end()
        if q >= end:
            return m, None
        if text.startswith(" (HINT: ", q) and text[end - 1] == ")" and end - 1 >= q + 8:
            return m, text[q + 8 : end - 1]
        if text.startswith(" (", q) and text[end - 1] == ")" and end - 1 >= q + 2:
            # torch's own note after the user's line: the framework frame that added a range
            # guard, `(_dynamo/variables/tensor.py:2606 in evaluate_expr)`, or why the user
            # code shown is not the guard's cause (`(user code shown is first use of this
            # value--...)`); a note is kept as the hint, a frame is not one
            note = text[q + 2 : end - 1]
            return m, None if _FRAMEWORK_FRAME.fullmatch(note) else note
        return None

    # `  # ` followed by a source comment, in order (the user code ends at the first one)
    seps: list[int] = []
    i = text.find("  # ")
    while i >= 0:
        if source_at(i + 4) is not None:
            seps.append(i)
        i = text.find("  # ", i + 1)
    i = text.find("# ")
    while i >= 0:
        if i > 0 and text[i - 1].isspace():
            r = i + 2
            k = bisect.bisect_left(seps, r)
            if k < len(seps):
                q = seps[k]
                m, hint = source_at(q + 4)  # type: ignore[misc]
                return _code_before(text, i), text[r:q], m, hint
            here = source_at(r)
            if here is not None:
                return _code_before(text, i), None, here[0], here[1]
        i = text.find("# ", i + 1)
    return None


def _code_before(text: str, hash_at: int) -> str:
    """The guard code before the whitespace that precedes its comment's `#`."""
    return text[:hash_at].rstrip()


def _find_sym(g: str) -> tuple[str, str, str] | None:
    """(source, size|stride, dim) of the first `src.size()[d]` / `src.stride()[d]` in `g`,
    where _SYM.s search would find it: the source is the run of [\\w'[].] characters before
    the first `.size()[d]` that has one."""
    for m in _SYM_TAIL.finditer(g):
        a = m.start()
        run = _SYM_CHARS.match(g[a - 1 :: -1]) if a else None  # the run, read backwards
        if run is None:
            continue
        return g[a - run.end() : a], m["what"], m["dim"]
    return None


def classify_guard(guard: str) -> dict[str, Any]:
    """Classify one failed guard text: kind, guard_source, dim, expected, actual.

    kind is one of size, stride, dtype, device, requires_grad, ndim, value, type, id,
    global_state, deallocated, other.
    """
    g = guard.strip()[:CLASSIFY_MAX]
    res: dict[str, Any] = {
        "kind": "other", "guard_source": None, "dim": None, "expected": None, "actual": None,
    }

    def put(kind: str, src: str | None = None, dim: Any = None, exp: Any = None,
            act: Any = None) -> dict[str, Any]:
        res.update(kind=kind, guard_source=src, dim=None if dim is None else int(dim),
                   expected=None if exp is None else str(exp).strip(),
                   actual=None if act is None else str(act).strip())
        return res

    if m := _TENSOR_CHECK.match(g):
        return put(m["what"], m["src"], m["dim"], m["exp"], m["act"])
    if m := _TENSOR_SIMPLE.match(g):
        kind = {"rank": "ndim", "dispatch key set": "device"}.get(m["what"], m["what"])
        return put(kind, m["src"], None, m["exp"], m["act"])
    if m := _DEVICE_INDEX.search(g):
        return put("device", None, None, m["exp"], m["act"])
    if m := _NOT_TENSOR.search(g):
        return put("type", m["src"], None, "Tensor")
    if m := _TENSOR_OTHER.match(g):
        return put("other", m["src"])
    if m := _DEALLOC.match(g):
        return put("deallocated", m["src"])
    if m := _GLOBAL_CHANGED.match(g):
        return put("global_state", m["what"].strip() or None)
    if g.startswith(("___check_global_state(", "___check_torch_function_mode_stack(")):
        return put("global_state")
    if m := _TYPE_ID.match(g):
        return put("type", m["src"], None, m["exp"])
    if m := _TYPE_CALL.match(g):
        return put("type", m["src"], None, m["exp"])
    if m := _OBJ_ID.match(g):
        return put("id", m["src"])
    if sym := _find_sym(g):
        eq = _SYM_EQ.match(g)
        exp = None
        if eq and eq["op"] == "==" and _SYM.fullmatch(eq["lhs"]):
            exp = eq["rhs"]
        elif eq and eq["op"] != "==":
            exp = f"{eq['op']} {eq['rhs']}" if _SYM.fullmatch(eq["lhs"]) else None
        return put(sym[1], sym[0], sym[2], exp)
    if m := _LEN.match(g):
        return put("value", f"len({m['src']})", None, m["exp"])
    if m := _AS_TENSOR.match(g):
        return put("value", m["src"], None, m["exp"])
    if (m := _VALUE.match(g)) and not m["src"].startswith(_NOT_SOURCE):
        return put("value", m["src"], None, m["exp"])
    return res


_REASON_START = re.compile(r"^(?P<cid>!?\d+(?:/\d+){0,2}|None): (?P<body>.*)$")
_GUARD_BLOCK = re.compile(r"^guard \d+ failures:$")
_RECOMPILING = re.compile(r"^Recompiling function (?P<fn>\S+) in (?P<file>.+):(?P<line>\d+)\s*$")


def _reason_rows(reason: str, index: int) -> list[dict[str, Any]]:
    """Rows for one cache entry's reason: ``cid: guard[; guard]`` + optional user stack."""
    lines = reason[:MESSAGE_MAX].split("\n")
    m = _REASON_START.match(lines[0])
    against, body = (m["cid"], m["body"]) if m else (None, lines[0])
    stack: dict[str, Any] | None = None
    rest = lines[1:]
    at = next((i for i, s in enumerate(rest) if s.strip() == "User stack trace:"), None)
    body = "\n".join([body, *rest[:at]]).rstrip()
    if at is not None:
        frames = []
        for s in rest[at + 1 :]:
            fm = _FRAME.match(s)
            if fm:
                frames.append([fm["file"], int(fm["line"]), fm["fn"], None])
            elif frames and frames[-1][3] is None and s.strip():
                frames[-1][3] = s.strip()
        if frames:
            f = frames[-1]
            stack = {"user_file": f[0], "user_line": f[1], "user_function": f[2],
                     "user_code": f[3]}
    rows = []
    pieces = split_top_level(body, "; ") if "; " in body else [body]
    for piece in pieces:
        c = split_guard_comment(piece)
        row: dict[str, Any] = {"reason_index": index, "failed_against": against,
                               "guard": c["code"]}
        row.update(classify_guard(c["code"]))
        row.update({k: c[k] for k in ("user_code", "user_file", "user_line", "user_function")})
        if stack and len(pieces) == 1:
            row.update({k: v for k, v in stack.items() if v is not None})
        rows.append(row)
    return rows


def _text_reasons(text: str) -> list[tuple[dict[str, Any], list[str]]]:
    """(code object, reason strings) per ``Recompiling function`` message of a record."""
    messages: list[tuple[dict[str, Any], list[str]]] = []
    for s in text.split("\n"):
        if m := _RECOMPILING.match(s):
            header = {"function": m["fn"], "filename": m["file"], "line": int(m["line"])}
            messages.append((header, []))
            continue
        if not messages:
            continue
        body = s[4:] if s.startswith("    ") else s.strip()
        if (
            not body.strip()
            or body.startswith("triggered by the following guard failure(s):")
            or _GUARD_BLOCK.match(body)
        ):
            continue
        messages[-1][1].append(body[2:] if body.startswith("- ") else body)
    out = []
    for header, lines in messages:
        # Reasons start with the cache entry's compile id (`1/0: ...`); torch versions that
        # did not print it start each reason with an unindented line.
        has_ids = any(_REASON_START.match(x) for x in lines)
        reasons: list[list[str]] = []
        for x in lines:
            new = (
                _REASON_START.match(x) is not None
                if has_ids
                else not (x[:1].isspace() or x.strip() == "User stack trace:")
            )
            if new or not reasons:
                reasons.append([x])
            else:
                reasons[-1].append(x)
        out.append((header, ["\n".join(r) for r in reasons]))
    return out


def parse_recompile_reasons(text: str) -> list[dict[str, Any]]:
    """Failed guards of a recompile, one dict per failed guard.

    Accepts the trace ``recompile_reasons`` payload (raw text for one reason, a JSON list for
    two or more) and the text-log ``recompiles``/``recompiles_verbose`` record text
    (``Recompiling function F in FILE:LINE`` ...). Keys: function, filename, line (of the code
    object; text log only), reason_index (cache entry order), failed_against (compile id the
    cache entry belongs to), guard, kind, guard_source, dim, expected, actual, user_code,
    user_file, user_line, user_function.
    """
    stripped = text.strip()
    if not stripped:
        return []
    none: dict[str, Any] = {"function": None, "filename": None, "line": None}
    if stripped.startswith("["):
        try:
            loaded = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            loaded = None
        if isinstance(loaded, list):
            return [
                {**none, **row}
                for i, r in enumerate(loaded)
                for row in _reason_rows(str(r), i)
            ]
    if not any(_RECOMPILING.match(s) for s in text.split("\n")):
        return [{**none, **row} for row in _reason_rows(stripped, 0)]
    return [
        {**header, **row}
        for header, reasons in _text_reasons(text)
        for i, r in enumerate(reasons)
        for row in _reason_rows(r, i)
    ]


# ------------------------------------------------------------------ guard tree

_NODE = re.compile(r"^(?P<bars>(?:\| )*)\+- (?P<body>.*)$")
_MANAGER_SOURCE = re.compile(r"GuardManager: source=(?P<src>.*?)(?:, (?:accessed_by|type)=|$)")
_LEAF = re.compile(r"^(?P<kind>[A-Z][A-Z0-9_]*)(?:: (?P<code>.*))?$", re.S)


# memoized: ranks of one job log the same text, parsed once per process (the result is shared,
# callers must not modify it)
@functools.lru_cache(maxsize=32)
def parse_guard_tree(text: str) -> list[dict[str, Any]]:
    """One dict per guard line of a ``TREE_GUARD_MANAGER`` dump.

    Keys: line_offset (0-based line of the guard within ``text``), depth (``+-`` nesting; the
    root manager is 0), kind (``TENSOR_MATCH``, ...), code (without the trailing comment),
    guard_source (the ``source=`` of the enclosing GuardManager), user_code, user_file,
    user_line, user_function (from the ``# code  # file:line in fn`` comment). Guard text
    that spans several lines (object reprs) is joined with newlines.
    """
    rows: list[dict[str, Any]] = []
    sources: list[str | None] = []
    current: dict[str, Any] | None = None
    buf: list[str] = []

    def flush() -> None:
        nonlocal current, buf
        if current is not None:
            m = _LEAF.match("\n".join(buf))
            if m:
                c = split_guard_comment(m["code"] or "")
                current.update(kind=m["kind"], code=c["code"] or None)
                current.update({k: c[k] for k in ("user_code", "user_file", "user_line",
                                                  "user_function")})
                rows.append(current)
        current, buf = None, []

    in_tree = False
    for i, line in enumerate(text.split("\n")):
        if line.startswith("TREE_GUARD_MANAGER:"):
            flush()
            in_tree = True
            sources = []
            continue
        if not in_tree:
            continue
        m = _NODE.match(line)
        if m is None:
            if line.startswith(("Guard latency", "Guard eval latency")) or not line.strip():
                flush()
                continue
            if current is not None:
                buf.append(line)
            continue
        flush()
        depth = len(m["bars"]) // 2
        body = m["body"]
        del sources[depth:]
        parent = sources[depth - 1] if depth >= 1 and len(sources) >= depth else None
        if "GuardManager" in body.split(":", 1)[0] or body.startswith(
            ("RootGuardManager", "KeyValueManager", "KeyManager", "ValueManager")
        ):
            sm = _MANAGER_SOURCE.search(body)
            sources.extend([parent] * (depth - len(sources)))
            sources.append(sm["src"] if sm else parent)
            continue
        if _LEAF.match(body):
            current = {"line_offset": i, "depth": depth, "guard_source": parent}
            buf = [body]
    flush()
    return rows


# ------------------------------------------------------------------ annotation

_ANN_GRAD = re.compile(r"^(?P<node>\S+): seq_nr from current_meta grad_fn_seq_nr\s*$")
_ANN_FWD = re.compile(r"^forward:: key: (?P<seq>\d+), value: (?P<node>\S+)\s*$")
_ANN_NODE = re.compile(r"^node: (?P<node>\S+)\s*$")
_ANN_SEQ = re.compile(r"^seq_nr: (?P<seq>\d+|None)\s*$")


def parse_annotation(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """seq_nr of joint-graph nodes from ``annotation`` records, in file order.

    Each record needs ``text`` and ``compile_id``; ``rank``, ``file`` and ``lineno`` are
    passed through (``lineno`` is advanced by the line offset inside the record). Uses the
    post-trace walk (``node: n`` / ``seq_nr: N``) and the ``forward:: key: N, value: n``
    map; ``Assigning new_seq_nr`` lines are ignored (they also come from later pattern-matcher
    traces). Side rule, per walk over one joint graph: a node is ``backward`` if it was
    logged with ``seq_nr from current_meta grad_fn_seq_nr`` before the walk or is followed by
    ``is_gradient_acc``; ``forward`` if it is a ``forward::`` value; otherwise it takes the
    side of its position (the joint graph lists forward nodes before backward ones, so nodes
    after the first backward node are backward), except ``tangents_N`` placeholders
    (backward) and ``output`` (null).
    """
    states: dict[tuple[Any, ...], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []

    def state(key: tuple[Any, ...]) -> dict[str, Any]:
        if key not in states:
            states[key] = {"grad": set(), "fwd": set(), "walk": None, "in_fwd_map": False}
        return states[key]

    def close(st: dict[str, Any]) -> None:
        walk = st["walk"]
        if not walk:
            return
        seen_bwd = False
        for r in walk:
            node = r["node"]
            if r.pop("_bwd") or node in st["grad"]:
                seen_bwd = True
                r["side"] = "backward"
            elif node in st["fwd"]:
                r["side"] = "forward"
            elif node == "output":
                r["side"] = None
            elif re.match(r"^tangents_\d+$", node):
                r["side"] = "backward"
            else:
                r["side"] = "backward" if seen_bwd else "forward"
        rows.extend(walk)
        st.update(walk=None, grad=set(), fwd=set())

    for rec in records:
        key = (rec.get("file"), rec.get("rank"), rec.get("compile_id"))
        st = state(key)
        base = rec.get("lineno")
        for off, line in enumerate(str(rec.get("text") or "").split("\n")):
            if m := _ANN_NODE.match(line):
                if st["walk"] is None:
                    st["walk"] = []
                st["in_fwd_map"] = False
                st["walk"].append(
                    {
                        "file": rec.get("file"), "rank": rec.get("rank"),
                        "compile_id": rec.get("compile_id"), "node": m["node"],
                        "seq_nr": None, "side": None, "_bwd": False,
                        "lineno": None if base is None else base + off,
                    }
                )
            elif m := _ANN_SEQ.match(line):
                if st["walk"]:
                    seq = m["seq"]
                    st["walk"][-1]["seq_nr"] = None if seq == "None" else int(seq)
            elif line.strip() == "is_gradient_acc":
                if st["walk"]:
                    st["walk"][-1]["_bwd"] = True
            elif m := _ANN_FWD.match(line):
                if st["walk"] is not None and not st["in_fwd_map"]:
                    close(st)  # a new forward map starts a new walk
                st["in_fwd_map"] = True
                st["fwd"].add(m["node"])
            elif m := _ANN_GRAD.match(line):
                if st["walk"] is not None:
                    close(st)
                st["grad"].add(m["node"])
    for st in states.values():
        close(st)
    rows.sort(key=lambda r: (str(r["file"]), r["lineno"] if r["lineno"] is not None else -1))
    return rows


# ------------------------------------------------------------------ compile stances

# torch.compiler.set_stance("fail_on_recompile") refusing a compile (torch/_dynamo/eval_frame.py,
# fail_callback): `Detected recompile when torch.compile stance is 'fail_on_recompile'.
# filename: 'F', function name: 'N', line number: L`, then, when the code object has cache
# entries, `    triggered by the following guard failure(s):` and one `    - <id>: <guard>` per
# entry (newest first, as a recompile message has them), and, with precompiled entries,
# `Failed on the following precompiled guards: ...`.
# Older torch (before the location was added) writes the first sentence alone.
_STANCE_REFUSAL = re.compile(
    r"Detected recompile when torch\.compile stance is '(?P<stance>[\w-]+)'"
    r"(?:\.\s*filename: '(?P<file>.*?)', function name: '(?P<fn>.*?)', line number: (?P<line>\d+))?"
)


def parse_stance_refusal(message: str | None) -> dict[str, Any] | None:
    """The compile a compile stance refused, from the RuntimeError's message: stance,
    function, filename, line (the frame's line when it was called; None where the message
    has no location, as older torch writes it), failures (one row per failed guard, as
    parse_recompile_reasons gives them: failed_against, guard, kind, guard_source, dim,
    expected, actual, ...; empty when the code object had no cache entry: its first compile
    was refused, or where torch wrote no guard block), precompiled (the message lists
    precompiled guards). None for any other message."""
    if not message:
        return None
    text = message[:MESSAGE_MAX]
    m = _STANCE_REFUSAL.search(text)
    if m is None:
        return None
    rest = text[m.end():]
    precompiled = "Failed on the following precompiled guards:" in rest
    rest = rest.split("Failed on the following precompiled guards:", 1)[0]
    failures: list[dict[str, Any]] = []
    if "triggered by the following guard failure(s):" in rest:
        # the same body as a `Recompiling function` message: read it with that grammar
        header = f"Recompiling function {m['fn'] or '?'} in {m['file'] or '?'}:{m['line'] or 0}\n"
        failures = [
            {**f, "function": m["fn"], "filename": m["file"], "line": int(m["line"]) if m["line"] else None}
            for f in parse_recompile_reasons(header + rest.lstrip("\n"))
        ]
    return {
        "stance": m["stance"], "function": m["fn"], "filename": m["file"],
        "line": int(m["line"]) if m["line"] else None, "failures": failures, "precompiled": precompiled,
    }
