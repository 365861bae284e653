"""Event names that PyTorch writes to TORCH_TRACE (torch 2.x up to 2.13).

Anything else is still kept as a row; `events.known_kind` is false for it and `stats`
counts it, so a new PyTorch release shows up as "unknown kinds", never as an error.
"""

from __future__ import annotations

KNOWN_KINDS: frozenset[str] = frozenset(
    {
        # torch/_dynamo, torch/_functorch, torch/_inductor (trace_structured)
        "artifact",
        "aot_backward_graph",
        "aot_forward_graph",
        "aot_inference_graph",
        "aot_joint_graph",
        "bwd_compilation_metrics",
        "bwd_compilation_metrics_runtime",
        "chromium_event",
        "compilation_metrics",
        "compilation_metrics_runtime",
        "compiled_autograd_graph",
        "create_symbol",
        "create_unbacked_symbol",
        "describe_source",
        "describe_storage",
        "describe_tensor",
        "dump_file",
        "dynamo_cpp_guards_str",
        "dynamo_guards",
        "dynamo_output_graph",
        "dynamo_start",
        "graph_dump",
        "guard_added_fast",
        "inductor_output_code",
        "inductor_post_grad_graph",
        "inductor_pre_grad_graph",
        "link",
        "optimize_ddp_split_child",
        "optimize_ddp_split_graph",
        "propagate_real_tensors",
        "str",
        "symbolic_shape_specialization",
        # dtrace_structured (TORCH_DTRACE)
        "expression_created",
        "export",
        "exported_program",
        "guard_added",
        "guard_on_data_dependent_error",
        "mismatched_fake_kernel",
        "missing_fake_kernel",
        "propagate_real_tensors_provenance",
    }
)

# aot_{forward,backward}_graph_pre_saved_tensors_hooks and friends carry a computed suffix.
KNOWN_KIND_PREFIXES: tuple[str, ...] = ("aot_forward_graph_", "aot_backward_graph_", "aot_saved_tensors_hooks_")

# Envelope keys that are context, not the event (FORMAT.md §2).
CONTEXT_KEYS: frozenset[str] = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload"}
)

# Kinds whose metadata `name` is the artifact/dump name shown in `events.name`.
NAMED_KINDS: frozenset[str] = frozenset(
    {"artifact", "dump_file", "graph_dump", "optimize_ddp_split_child", "link"}
)


def is_known_kind(kind: str) -> bool:
    """True when `kind` is an event name PyTorch is known to write."""
    return kind in KNOWN_KINDS or kind.startswith(KNOWN_KIND_PREFIXES)

# Payloads the parse-time tables need (recompile reasons, graph breaks): a lazy parse
# (traceview.ingest.pipeline) materializes only these, decodes chromium events straight into the
# `chromium` rows that spans are built from, and reads every other payload from the input
# file when something asks for it (`parsers.torch_trace.hydrate`).
SUMMARY_PAYLOAD_ARTIFACTS: frozenset[str] = frozenset(
    {
        "recompile_reasons",
        "dynamo_graph_break_reason",
        # small payloads the summary's facts read (traceview.analyze.compile_facts)
        "get_local_code_state",
        "put_local_code_state",
        "get_remote_code_state",
        "put_remote_code_state",
        "fx_graph_cache_bypass",
        "aotautograd_cache_bypass",
        # what ranks communicate and run (parsers.collectives; the summary compares ranks)
        "inductor_collective_schedule",
        "inductor_runtime_and_tensor_meta",
        "graph_execution",
    }
)
# Events (not artifacts) whose payloads the summary reads: DDPOptimizer's split parent
# (parsers.collectives: the submodules and their parameters; one per split, small).
SUMMARY_PAYLOAD_KINDS: frozenset[str] = frozenset({"optimize_ddp_split_graph"})
# A Dynamo graph (`dynamo_output_graph`) whose payload names a higher-order op is kept too:
# the summary lists the higher-order ops each compile captured; so is one with runtime
# asserts (`_assert_scalar`, on unbacked symbols: the summary's data-dependent sizes); so is
# one with functional collectives (the sizes and dtypes of what each rank communicates).
SUMMARY_PAYLOAD_GRAPH_MARK = "torch.ops.higher_order."
SUMMARY_PAYLOAD_ASSERT_MARK = "torch.ops.aten._assert_scalar"
SUMMARY_PAYLOAD_COLLECTIVE_MARK = "torch.ops._c10d_functional."
SUMMARY_PAYLOAD_GRAPH_MARKS: tuple[str, ...] = (
    SUMMARY_PAYLOAD_GRAPH_MARK, SUMMARY_PAYLOAD_ASSERT_MARK, SUMMARY_PAYLOAD_COLLECTIVE_MARK,
)
