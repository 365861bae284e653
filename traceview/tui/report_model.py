"""The first screen's model before the Trace is loaded: the cached findings document alone.

`traceview open` of unchanged inputs reads the findings document that `summary`, `report` or an
earlier `open` kept beside the parse cache (traceview.output.findings_document) and shows its
findings at once; the Trace is loaded in a worker thread after that first paint, and the main
screen then takes the whole `TraceModel` (traceview.tui.model). The findings are the typed list
the summary prints (traceview.tui.finding_rows), never worded here. Nothing here imports polars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traceview.tui.finding_rows import Finding, findings_from_report


@dataclass
class ReportModel:
    """What the Findings view needs, from the report alone (the same fields as `TraceModel`'s
    that the Findings view and the main screen read before the Trace is there)."""

    report: dict[str, Any]
    findings: list[Finding]
    missing: dict[str, str] = field(default_factory=dict)
    trace: None = None  # not loaded yet: the views beyond the findings wait for it
    graph_tables_ready: bool = False

    @classmethod
    def of(cls, report: dict[str, Any]) -> ReportModel:
        return cls(report, findings_from_report(report))

    @property
    def compile_count(self) -> int:
        return int(self.report.get("compiles") or 0)  # build_report's: trace.compiles.height

    @property
    def text_only(self) -> bool:
        """As TraceModel.text_only: no compiles, but compile ids in the text log."""
        return self.compile_count == 0 and (self.report.get("compile_ids_in_text_logs") or 0) > 0
