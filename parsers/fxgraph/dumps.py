"""Where FX graph texts are: which payloads hold one, and the ``TRACED GRAPH`` blocks of a
TORCH_LOGS record, with the graph kind of each.

A TORCH_TRACE names its graphs by event kind or artifact name (:data:`GRAPH_KINDS`,
:func:`graph_kind`); a text log prints them in ``TRACED GRAPH`` blocks under a title
(:func:`split_traced_graphs`). The text found here is what :mod:`parsers.fxgraph` parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from parsers.lexing import ANSI

__all__ = ["GRAPH_KINDS", "GraphDump", "graph_kind", "is_graph_text", "split_traced_graphs"]

#: Graph kind for a trace event kind or artifact name (anything else keeps its raw name).
GRAPH_KINDS: dict[str, str] = {
    "dynamo_output_graph": "dynamo",
    "aot_joint_graph": "aot_joint",
    "aot_forward_graph": "aot_forward",
    "aot_backward_graph": "aot_backward",
    "aot_inference_graph": "aot_inference",
    "before_pre_grad_graph": "pre_grad_before",
    "after_pre_grad_graph": "pre_grad_after",
    "before_joint_graph": "joint_before",
    "after_joint_graph": "joint_after",
    "before_post_grad_graph": "post_grad_before",
    "inductor_post_grad_graph": "post_grad",
    # older torch (tlparse's provenance inputs) logged the post-grad graph under this name
    "after_post_grad_graph": "post_grad",
    "optimize_ddp_split_graph": "ddp_split",
    "optimize_ddp_split_child": "ddp_child",
    "compiled_autograd_graph": "compiled_autograd",
}

_TRACED_HEADER = re.compile(r"^\s*===== (?P<title>.*?) =====\s*$")
_GRAPH_TEXT = re.compile(r"^(?:\S.* )?class [^\s(]+\(torch\.nn\.Module\):")


def graph_kind(name: str) -> str:
    """Graph kind for a trace event kind / artifact name (see GRAPH_KINDS); raw name otherwise."""
    return GRAPH_KINDS.get(name, name)


def is_graph_text(text: str | None) -> bool:
    """True when ``text`` starts like ``print_readable`` output (``class X(torch.nn.Module):``)."""
    if not text:
        return False
    first = text.lstrip("\r\n").split("\n", 1)[0]
    return bool(_GRAPH_TEXT.match(ANSI.sub("", first).lstrip()))


# --------------------------------------------------------------------------- text logs
@dataclass(frozen=True)
class GraphDump:
    """One ``TRACED GRAPH`` block cut out of a TORCH_LOGS record."""

    title: str  #: text between the ``=====`` rules, e.g. ``Forward graph 0``
    kind: str  #: graph kind (``aot_forward``, ``aot_backward``, ... or the raw title)
    aot_graph: int | None  #: the number in ``Forward graph 0`` (AOT id), else None
    text: str  #: the graph text: from the ``<path> class ...`` line to the block's end
    line_offset: int  #: 0-based line of ``text``'s first line within the record text


_TITLE_KINDS = (
    (re.compile(r"^Forward graph(?: (\d+))?$"), "aot_forward"),
    (re.compile(r"^Backward graph(?: (\d+))?$"), "aot_backward"),
    (re.compile(r"^Joint graph(?: (\d+))?$"), "aot_joint"),
    (re.compile(r"^BEFORE PRE GRAD$"), "pre_grad_before"),
    (re.compile(r"^AFTER POST GRAD$"), "post_grad"),
    (re.compile(r"^Compiled autograd graph$"), "compiled_autograd"),
    (re.compile(r"^__compiled_fn_\d+.*$"), "dynamo"),
)


def split_traced_graphs(text: str) -> list[GraphDump]:
    """Cut the ``TRACED GRAPH`` / `` ===== <title> =====`` blocks out of a text-log record.

    A record may hold one block (one logging call) or several (consecutive lines merged);
    a block ends at the next ``TRACED GRAPH`` line or header. Lines before the first header
    (``aot_config id: ...``) are not graphs. Trailing blank lines of a block are dropped;
    every other byte of the block is kept. ``Forward graph N`` is reported as
    ``aot_forward`` here; callers that see no ``Backward graph N`` for the same compile may
    call it ``aot_inference`` (the inference path logs the same title).
    """
    lines = text.split("\n")
    heads: list[tuple[int, str]] = []
    for i, raw in enumerate(lines):
        m = _TRACED_HEADER.match(ANSI.sub("", raw))
        if m:
            heads.append((i, m.group("title")))
    out: list[GraphDump] = []
    for k, (i, title) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        if k + 1 < len(heads) and end - 1 > i and ANSI.sub("", lines[end - 1]).strip() == "TRACED GRAPH":
            end -= 1
        body = lines[i + 1 : end]
        while body and not body[-1].strip():
            body.pop()
        kind, number = title, None
        for pat, k_name in _TITLE_KINDS:
            m = pat.match(title)
            if m:
                kind = k_name
                if m.groups() and m.group(1) is not None:
                    number = int(m.group(1))
                break
        out.append(GraphDump(title, kind, number, "\n".join(body), i + 1))
    return out

