"""The typed finding: what every view renders.

The analyzers' results are judged once (traceview.analyze.judge) into one list of `Finding`s,
ranked once by what they cost; the summary text, `--json`'s `findings`, the page, the UI's
Findings view, `watch`'s digest and `diff` render that list and never re-word it. A finding is
plain data: it serializes to the JSON the report carries (`to_json`) and back (`from_json`), so
a view that has only the report's JSON (a cached document, another host's report) has the same
typed list.

Severity says what the user does with it:
- `act`: something to fix or look at, most costly first;
- `expected`: torch.compile working as designed (one recompile of automatic dynamic shapes, a
  wrapper's own graph breaks): said, with why, after what needs action;
- `fact`: how the run compiled (a compile slow relative to the run): context, last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from parsers.compile_ids import label as id_label

Severity = Literal["act", "expected", "fact"]
SEVERITIES: tuple[str, ...] = ("act", "expected", "fact")

# Kinds, most costly first within a severity: torch.compile that compiled nothing (the whole
# model ran eagerly), a collective that timed out behind another rank's compile (what killed
# the job, and why), a job stopped from outside (what every rank was doing then), a rank left
# inside a compile (a hang), ranks whose collectives differ, ranks stalled while another compiled
# alone, ranks whose
# collectives differ (a hang or a wrong result), a crash, a rank that compiled differently, a
# recompile storm, a failed compile (its frame runs eagerly), CUDA-graph findings (each step),
# graph breaks, loaded cache artifacts that missed (a compile from scratch each), a single recompile, then what costs once (max-autotune's autotuning, a slow
# compile).
KINDS: tuple[str, ...] = (
    "compiled_nothing", "timeout", "stop", "unfinished", "collectives", "stall", "crash", "divergence", "storm", "failure", "cudagraphs", "graph_break",
    "cache", "recompile", "expected", "fixed", "autotune", "compile_time",
)

@dataclass(frozen=True)
class KindWords:
    """A kind's words, every view's: `title` the UI's list label and the page's tag; `section`
    and `about` the summary's section heading (`about` may name counts the summary fills in:
    {functions}, {distinct}, {total}, {failed}, {ranks}; a dict: by the section's facet or
    severity); `noun` what the head line counts (None: the head line says the finding's own
    short words)."""

    title: str
    section: str
    about: str | dict[str, str]
    noun: str | None = None


KIND_WORDS: dict[str, KindWords] = {
    "compiled_nothing": KindWords("COMPILED NOTHING", "COMPILED NOTHING", "torch.compile had no effect"),
    "timeout": KindWords("COLLECTIVE TIMEOUT", "COLLECTIVE TIMEOUT",
                         "a collective ran past the process group's timeout while another rank compiled"),
    "stop": KindWords("STOPPED", "STOPPED", "from outside: not the program's own error"),
    "unfinished": KindWords("UNFINISHED COMPILE", "UNFINISHED COMPILES",
                            "begun, no compilation_metrics: killed, hung or still running when the log ends", "unfinished compile"),
    "collectives": KindWords("COLLECTIVES", "COLLECTIVES", {
        "mismatch": "the ranks do not issue the same collectives", "wait": "ranks waited for another's compile",
        "execution": "the ranks ran different compiled graphs"}, "collectives finding"),
    "stall": KindWords("RANK STALL", "RANK STALLS", "ranks waited while another rank compiled alone"),
    "crash": KindWords("CRASHED", "CRASHED", "the program ended with an uncaught error"),
    "divergence": KindWords("RANK DIVERGENCE", "RANK DIVERGENCE", {
        "pair": "the 2 ranks compiled differently (rank {second} shown against rank {first})",
        "majority": "{ranks} from the majority"}, "diverging rank"),
    "storm": KindWords("RECOMPILE STORM", "RECOMPILES", "{functions}, most costly first", "recompiling function"),
    "failure": KindWords("FAILED COMPILE", "FAILED COMPILES", "{failed}, most serious first", "failed compile"),
    "cudagraphs": KindWords("CUDA GRAPHS", "CUDA GRAPHS", "", "CUDA-graph finding"),
    "graph_break": KindWords("GRAPH BREAK", "GRAPH BREAKS", {
        "act": "{distinct} distinct, {total} in all, most impact first",
        "expected": "{distinct} distinct, {total} in all: a wrapper's own (nothing of yours to avoid)",
        "fact": "{distinct} distinct, {total} in all: the run applied torch's fix after torch._dynamo.reset()"},
        "graph break"),
    "cache": KindWords("LOADED CACHE", "LOADED CACHE ARTIFACTS",
                       "torch.compiler.load_cache_artifacts before compiling: what it served"),
    "recompile": KindWords("RECOMPILED ONCE", "RECOMPILES", "{functions}, most costly first", "recompiling function"),
    "expected": KindWords("EXPECTED RECOMPILES", "EXPECTED RECOMPILES", "{functions}, nothing to fix"),
    "fixed": KindWords("RECOMPILES FIXED LATER", "RECOMPILES FIXED LATER",
                       "{functions}, the run applied the fix after torch._dynamo.reset()"),
    "autotune": KindWords("MAX-AUTOTUNE", "MAX-AUTOTUNE",
                          "GEMM autotuning took most of the compile time, or the compile ended in it"),
    "compile_time": KindWords("SLOW COMPILE", "SLOW COMPILES", "at least 1s and 10% of their rank's compile time"),
}
assert tuple(KIND_WORDS) == KINDS
# One title per kind (KIND_WORDS' titles): the UI's list label and the page's tag.
KIND_TITLES: dict[str, str] = {k: w.title for k, w in KIND_WORDS.items()}
# kinds that share a summary section and a head-line entry: a storm and a single recompile that
# needs action are both RECOMPILES, counted as recompiling functions
SECTION_OF: dict[str, str] = {"recompile": "storm"}


def tag_of(kind: str, severity: str) -> str:
    """A kind's title as a view tags one finding of it (Finding.tag)."""
    title = KIND_TITLES[kind]
    return f"EXPECTED {title}" if severity == "expected" and "EXPECTED" not in title else title


@dataclass(frozen=True)
class CompileRef:
    """One compile a finding is about: rank, compile id as the tables hold it (`0/1`,
    `!0/1/0`, `unknown_12`), which use of that id (after torch._dynamo.reset() the ids restart:
    2 is the second [0/0]), and how many attempts it took (a restart after a graph break)."""

    rank: int | None
    compile_id: str
    occurrence: int | None = None
    attempts: int | None = None

    def label(self) -> str:
        """As every view prints it: `0/1`, `0/0 #2`, `0/0_1`."""
        return id_label(self.compile_id, self.occurrence, self.attempts)

    def __str__(self) -> str:
        """In a sentence, with its brackets: `[0/1]`, `[0/0 #2]`, `[0/0_1]`."""
        return f"[{self.label()}]"


@dataclass(frozen=True)
class Evidence:
    """A record a finding rests on: the file and line to jump to."""

    file: str | None
    lineno: int | None
    rank: int | None = None


@dataclass
class Cost:
    """What a finding costs, as far as the log shows it: seconds (compile time spent again, a
    stall, a hang's time so far), ranks stalled by it, compiles wasted."""

    seconds: float = 0.0
    ranks_stalled: int = 0
    compiles_wasted: int = 0


@dataclass
class Finding:
    """One finding, judged once.

    `claim` is its first line; `lines` the rest the summary prints, each `(label, text)` with
    labels such as `fix:`, `next:`, `why:`, `how sure:` ("" for a plain line); `more` what only
    a detailed view shows (the UI's side panel, the page's details, JSON). `next_step` repeats
    the step to take as data. `ranks` are the ranks it holds for (the same finding on several
    ranks is one finding); `compiles` its subjects; `target` where a view jumps (`compare`: the
    compile whose guard failed, for a recompile)."""

    kind: str
    severity: Severity
    claim: str
    lines: list[tuple[str, str]] = field(default_factory=list)
    more: list[tuple[str, str]] = field(default_factory=list)
    next_step: str | None = None
    certainty: str = "certain"
    cost: Cost = field(default_factory=Cost)
    ranks: list[int | None] = field(default_factory=list)
    compiles: list[CompileRef] = field(default_factory=list)
    code: str | None = None  # the code object as the user knows it (findings.code_label)
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 1  # occurrences it stands for (a graph break's hits, a failure's ranks)
    facet: str | None = None  # a kind's sub-kind (collectives: mismatch / wait / execution / unknown)
    target: CompileRef | None = None
    compare: str | None = None
    view: str = "frames"  # where a UI jump goes: "frames" or "guards"
    key: str = ""  # identity across views and reloads (kind + what it is about)
    short: str | None = None  # its words in the summary's `findings:` line, where the kind has no count
    abridged: bool = False  # its lines say in short what `more` says in full (the summary points to the details)

    @property
    def title(self) -> str:
        return KIND_TITLES[self.kind]

    @property
    def tag(self) -> str:
        """The title with the severity where the title does not say it: `EXPECTED GRAPH BREAK`
        (a wrapper's own break), as the summary's EXPECTED GRAPH BREAKS section has it."""
        return tag_of(self.kind, self.severity)

    def rank_key(self) -> tuple:
        """The one order: severity, then kind (most costly kind first), then seconds lost."""
        # a graph break that sent its whole frame to eager costs what a failed compile does
        kind = "failure" if self.kind == "graph_break" and self.facet == "frame_skipped" else self.kind
        return (SEVERITIES.index(self.severity), KINDS.index(kind), -(self.cost.seconds or 0.0))

    def identity(self) -> tuple:
        """What makes a finding of one run the same as one of another run (`diff`): its kind,
        severity and sub-kind, and what it is about (the code object, else its claim with the
        numbers that change from run to run, seconds and counts, left out)."""
        about = self.code or re.sub(r"\d+(?:\.\d+)?", "#", self.claim)
        return (self.kind, self.severity, self.facet, about)

    def to_json(self) -> dict[str, Any]:
        """As the report's `findings` carry it: every field in order (what dataclasses.asdict
        gives; built directly: a finding on 16,384 ranks holds as many compiles), `lines` and
        `more` as label/text objects, then `title`."""
        d = {name: _plain(getattr(self, name)) for name in _FIELDS}
        d["title"] = self.title
        d["lines"] = [{"label": a, "text": b} for a, b in self.lines]
        d["more"] = [{"label": a, "text": b} for a, b in self.more]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        def refs(xs: list[dict[str, Any]] | None) -> list[CompileRef]:
            return [CompileRef(**x) for x in xs or []]

        t = d.get("target")
        return cls(
            kind=d["kind"], severity=d["severity"], claim=d["claim"],
            lines=[(x["label"], x["text"]) for x in d.get("lines") or []],
            more=[(x["label"], x["text"]) for x in d.get("more") or []],
            next_step=d.get("next_step"), certainty=d.get("certainty") or "certain",
            cost=Cost(**(d.get("cost") or {})), ranks=list(d.get("ranks") or []),
            compiles=refs(d.get("compiles")), code=d.get("code"),
            evidence=[Evidence(**e) for e in d.get("evidence") or []], count=d.get("count") or 1,
            facet=d.get("facet"), target=CompileRef(**t) if t else None, compare=d.get("compare"),
            view=d.get("view") or "frames", key=d.get("key") or "", short=d.get("short"),
            abridged=bool(d.get("abridged")),
        )


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Finding))


def _plain(value: Any) -> Any:
    """`value` as dataclasses.asdict copies it: a finding's parts (CompileRef, Evidence, Cost)
    as dicts of their fields, lists and tuples copied."""
    if isinstance(value, (CompileRef, Evidence, Cost)):
        return {f: getattr(value, f) for f in _PART_FIELDS[type(value)]}
    if isinstance(value, list):
        return [_plain(x) for x in value]
    if isinstance(value, tuple):
        return tuple(_plain(x) for x in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_PART_FIELDS: dict[type, tuple[str, ...]] = {t: tuple(f.name for f in fields(t)) for t in (CompileRef, Evidence, Cost)}


def ranked(findings: list[Finding]) -> list[Finding]:
    """The findings in the one order every view shows (stable within equal cost)."""
    return sorted(findings, key=Finding.rank_key)


def findings_of(report: dict[str, Any]) -> list[Finding]:
    """The typed, ranked findings a report carries (`report["findings"]`, already ranked)."""
    return [Finding.from_json(d) for d in report.get("findings") or []]
