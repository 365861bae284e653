"""The Findings view's rows: the report's typed findings (traceview.analyze.finding, judged and
worded once by traceview.analyze.judge) adapted to what the list and its side panel show, with
where Enter takes the user. Nothing here judges or words a finding; nothing imports Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceview.analyze.finding import Finding as TypedFinding
from traceview.analyze.finding import findings_of, tag_of


@dataclass
class Finding:
    """One finding of the report as the Findings view shows it (the typed finding's words:
    traceview.analyze.finding), with where Enter takes the user."""

    kind: str
    title: str  # one line, no prefix: the finding's claim
    summary: list[str]  # a few short lines shown in the list: its first lines
    detail: list[tuple[str, str]]  # (label, text) shown beside the list: its lines, then its details
    rank: int | None = None
    compile_id: str | None = None
    compare_id: str | None = None  # recompiles: the compile whose guard failed
    view: str = "frames"  # where Enter goes: "guards" or "frames"
    file: str | None = None
    lineno: int | None = None
    occurrence: int | None = None  # which compile with compile_id (after torch._dynamo.reset()); None: the first
    severity: str = "act"

    @property
    def tag(self) -> str:
        """Its kind's title, `EXPECTED` where its severity is and the title does not say it."""
        return tag_of(self.kind, self.severity)

    def as_text(self) -> str:
        lines = [f"{self.tag}: {self.title}"]
        lines += [f"{label.rstrip(':').strip()}: {text}" if label else text for label, text in self.detail]
        return "\n".join(lines)


def _line(label: str, text: str) -> str:
    return f"{label.strip()} {text}" if label else text


def ui_finding(f: TypedFinding) -> Finding:
    """The Findings view's row of one typed finding: the same words, nothing judged again."""
    t = f.target
    ev = f.evidence[0] if f.evidence else None
    detail = [(label.rstrip(": ").rstrip(":"), text) for label, text in f.lines + f.more if text]
    if f.certainty != "certain" and not any(label == "how sure" for label, _ in detail):
        detail.append(("how sure", f.certainty))
    return Finding(
        f.kind, f.claim, [_line(a, b) for a, b in f.lines[:2]] or [f.claim], detail,
        t.rank if t else (f.ranks[0] if f.ranks else None), t.compile_id if t else None, f.compare, f.view,
        ev.file if ev else None, ev.lineno if ev else None, t.occurrence if t else None, f.severity,
    )


def findings_from_report(report: dict[str, Any]) -> list[Finding]:
    """The report's findings as the Findings view lists them: its typed list, in its order."""
    return [ui_finding(f) for f in findings_of(report)]


