"""The rule API: what a rule file in ``rules/`` imports (and nothing else but gpuadvise.errors).

- the engine (:mod:`gpuadvise.rules.engine`): Rule, Finding, Evidence, Estimate, Variant, Proxy,
  Measurement, the registry and the run;
- the context (:mod:`gpuadvise.rules.context`): RuleContext (facts, models, services) and
  ModelUnavailable;
- what rules compute with: the trace's enums and lane-level view, the pure models' helpers, the
  one roofline, the source helpers and rewriting, the layout proxies, struct layouts and demanded
  bits. A rule file imports them from here, never from the modules that define them (checked by
  tests/rules/test_rule_imports.py), so that the API a rule sees is this one list.
"""

from gpuadvise.arrays import distinct, distinct_rows
from gpuadvise.devices import memory_rates
from gpuadvise.model.banks import active_lanes, atomic_contention, record_wavefronts
from gpuadvise.model.coalescing import record_sectors, touched_lines
from gpuadvise.model.l2 import l2_model
from gpuadvise.model.occupancy import OccupancyInputError, max_active_blocks
from gpuadvise.model.reduction import Phase, ReductionTree, reduction_trees
from gpuadvise.model.roofline import (
    LAUNCH_FLOOR_S,
    Roofline,
    Traffic,
    amortised_ratio,
    dram_bytes_per_s,
    l1_cycles,
    launch_estimate,
    launch_times,
    occupancy_ratio,
    roofline,
    sm_cycles_per_s,
    with_floor,
    work_ratio,
)
from gpuadvise.rules.context import (
    EmulationStats,
    KernelFacts,
    ModelResults,
    RuleServices,
    SharedLayout,
    SharedVariable,
)
from gpuadvise.rules.demanded_bits import demanded_bits, load_widths
from gpuadvise.rules.engine import *  # noqa: F403
from gpuadvise.rules.engine import __all__ as _engine_all
from gpuadvise.rules.engine import doc_sections, use_model_check, validate_rule
from gpuadvise.rules.estimates import (
    MODEL,
    buffer_records,
    fp64_to_fp32_estimate,
    issue_change_estimate,
    kernel_launch_times,
    l1_roofline_estimate,
    launch_change_estimate,
    model_check,
    repeated_requests,
    shared_wavefront_estimate,
    view_traffic,
)
from gpuadvise.rules.proxy import (
    FOLD,
    PackedField,
    Packing,
    merge_stores,
    packed_proxy,
    plan_packing,
    proxy_where,
    soa_description,
    soa_proxy,
    source_text,
    tile_pitch,
    tile_proxy,
)
from gpuadvise.rules.structs import StructField, StructLayout, parse_struct, struct_for
from gpuadvise.source import fixkit  # the operations fixes are made of (issue 28)
from gpuadvise.source.patch import (
    PatchError,
    block_index_uses,
    remap_block_index,
    tiled_block_index_cuda,
    tiled_block_index_lines,
)
from gpuadvise.source.signature import parse_signature
from gpuadvise.source.text import (
    KernelSource,
    blank_comments_and_strings,
    find_kernel_source,
    line_of,
    match_brace,
    match_close,
    split_top,
)
from gpuadvise.source.tree import Expr, parse_expression
from gpuadvise.spec.expr import evaluate as evaluate_expression
from gpuadvise.toolchain.sass import (  # SASS operand readers
    halfword_prmt,
    one_lane_fp16,
    same_source_file,
)
from gpuadvise.trace.access import (
    WARP,
    AccessTrace,
    Kind,
    Space,
    distinct_records,
    record_weights,
)
from gpuadvise.trace.view import (
    BufferInfo,
    FieldLoad,
    Lanes,
    Pattern,
    Reuse,
    TraceView,
    buffer_infos,
    cta_reuse,
    field_loads,
    infer_pattern,
    integer_args,
    stride_mode,
    trace_view,
    warp_footprint,
)

__all__ = [
    "distinct",
    "distinct_rows",
    *_engine_all,
    "FOLD",
    "WARP",
    "AccessTrace",
    "BufferInfo",
    "EmulationStats",
    "Expr",
    "FieldLoad",
    "KernelFacts",
    "KernelSource",
    "Kind",
    "Lanes",
    "ModelResults",
    "OccupancyInputError",
    "PackedField",
    "Packing",
    "PatchError",
    "Pattern",
    "Phase",
    "ReductionTree",
    "Reuse",
    "Roofline",
    "RuleServices",
    "SharedLayout",
    "SharedVariable",
    "Space",
    "StructField",
    "StructLayout",
    "TraceView",
    "Traffic",
    "active_lanes",
    "atomic_contention",
    "blank_comments_and_strings",
    "block_index_uses",
    "buffer_infos",
    "cta_reuse",
    "demanded_bits",
    "doc_sections",
    "dram_bytes_per_s",
    "evaluate_expression",
    "field_loads",
    "find_kernel_source",
    "fixkit",
    "infer_pattern",
    "integer_args",
    "l1_cycles",
    "amortised_ratio",
    "launch_times",
    "with_floor",
    "LAUNCH_FLOOR_S",
    "occupancy_ratio",
    "repeated_requests",
    "buffer_records",
    "l1_roofline_estimate",
    "launch_change_estimate",
    "shared_wavefront_estimate",
    "launch_estimate",
    "memory_rates",
    "l2_model",
    "line_of",
    "load_widths",
    "match_brace",
    "match_close",
    "max_active_blocks",
    "merge_stores",
    "packed_proxy",
    "parse_signature",
    "parse_struct",
    "plan_packing",
    "proxy_where",
    "record_sectors",
    "record_weights",
    "distinct_records",
    "record_wavefronts",
    "reduction_trees",
    "remap_block_index",
    "roofline",
    "sm_cycles_per_s",
    "soa_description",
    "soa_proxy",
    "source_text",
    "stride_mode",
    "struct_for",
    "tile_pitch",
    "tile_proxy",
    "tiled_block_index_cuda",
    "tiled_block_index_lines",
    "touched_lines",
    "trace_view",
    "view_traffic",
    "issue_change_estimate",
    "fp64_to_fp32_estimate",
    "kernel_launch_times",
    "MODEL",
    "validate_rule",
    "warp_footprint",
    "work_ratio",
    "halfword_prmt",
    "one_lane_fp16",
    "parse_expression",
    "same_source_file",
    "split_top",
]

# GA403 (and GA101's preference for it): what shortening the values at the register peak frees
from gpuadvise.model.registers import LiveValue, RegisterPressure  # noqa: E402
from gpuadvise.rules.pressure import (  # noqa: E402
    COMPUTE_LATE,
    MOVE_LOAD,
    PACK_HALVES,
    RECOMPUTE,
    RELOAD,
    SMALLER_TILE,
    PressurePlan,
    Shortening,
    memory_write_between,
    move_declarations,
    peak_after,
    pressure_plan,
    shortenings,
)

__all__ += [
    "COMPUTE_LATE",
    "MOVE_LOAD",
    "PACK_HALVES",
    "RECOMPUTE",
    "RELOAD",
    "SMALLER_TILE",
    "LiveValue",
    "PressurePlan",
    "RegisterPressure",
    "Shortening",
    "memory_write_between",
    "move_declarations",
    "peak_after",
    "pressure_plan",
    "shortenings",
]

# every rule's estimate goes through the launch model (issue 29): the engine runs it through
# this check, which the estimates module holds (it imports the engine, not the other way)
use_model_check(model_check)

# GA201/GA207: the contended shared-memory atomics
from gpuadvise.rules.atomics import (  # noqa: E402
    ATOMICS,
    Contention,
    cas_lines,
    contended_lines,
    serial_updates,
    with_serial_updates,
)
from gpuadvise.rules.global_atomics import HotAddress, hot_addresses, update_ns  # noqa: E402
from gpuadvise.rules.lanes import UniformLanes, uniform_lanes  # noqa: E402

# GA308/GA309: a thread's repeated accesses of one global address
from gpuadvise.rules.repeats import (  # noqa: E402
    MIN_ACCUMULATION_REPEATS,
    Accumulated,
    ThreadReloads,
    accumulation_reloads,
    accumulations,
    later_repeats,
    reload_costs,
    removable_records,
    same_thread_reloads,
    thread_keys,
    varying_repeats,
    whole_records,
)

# GA306/GA307: the transposition and shared-staging helpers (kept apart to merge cleanly)
from gpuadvise.rules.staging import (  # noqa: E402
    DirectReads,
    StagedTile,
    plan_direct_reads,
    staged_tiles,
)
from gpuadvise.rules.transpose import (  # noqa: E402
    TransposeTile,
    Transposition,
    copy_statement,
    find_transposition,
    index_parameters,
    transpose_body,
    transpose_tiles,
)

__all__ += [
    "MIN_ACCUMULATION_REPEATS",
    "Accumulated",
    "ThreadReloads",
    "accumulation_reloads",
    "accumulations",
    "later_repeats",
    "reload_costs",
    "removable_records",
    "same_thread_reloads",
    "thread_keys",
    "whole_records",
    "varying_repeats",
    "ATOMICS",
    "Contention",
    "HotAddress",
    "hot_addresses",
    "UniformLanes",
    "uniform_lanes",
    "update_ns",
    "cas_lines",
    "contended_lines",
    "serial_updates",
    "with_serial_updates",
    "DirectReads",
    "StagedTile",
    "plan_direct_reads",
    "staged_tiles",
    "TransposeTile",
    "Transposition",
    "copy_statement",
    "find_transposition",
    "index_parameters",
    "transpose_body",
    "transpose_tiles",
]

# counts in words in every message ("3 barriers", never "barrier(s)")
from gpuadvise.words import counted, lines_text  # noqa: E402

__all__ += ["counted", "lines_text"]

# GA303: consecutive scalar accesses of one thread (trace, SASS) and their vector rewrite
from gpuadvise.rules.narrow_loads import NarrowLoad, narrow_estimate, narrow_loads  # noqa: E402
from gpuadvise.rules.scalar_runs import (  # noqa: E402
    SCALAR_NOTE_BELOW,
    PieceGroup,
    SassAt,
    ScalarPiece,
    global_totals,
    piece_buffer,
    piece_numbers,
    piece_site,
    sass_at,
    scalar_pieces,
    scalar_run_estimate,
)
from gpuadvise.rules.vectorize import VectorRewrite, multiple_of, vector_rewrite  # noqa: E402

__all__ += [
    "SCALAR_NOTE_BELOW",
    "PieceGroup",
    "SassAt",
    "ScalarPiece",
    "global_totals",
    "piece_buffer",
    "piece_numbers",
    "piece_site",
    "sass_at",
    "scalar_pieces",
    "scalar_run_estimate",
    "NarrowLoad",
    "narrow_estimate",
    "narrow_loads",
    "VectorRewrite",
    "multiple_of",
    "vector_rewrite",
]

# GA204/GA206: the trace's per-buffer facts and the grid-stride rewrites
from gpuadvise.rules.grid_stride import (  # noqa: E402
    PREFIX as GRID_STRIDE_PREFIX,
)
from gpuadvise.rules.grid_stride import (  # noqa: E402
    VECTORS,
    VectorLoad,
    buffer_uses,
    elementwise_diff,
    elementwise_vector_diff,
    grid_bound,
    hidden_block_reads,
    index_offset,
    is_grid_stride,
    launch_specific,
    load_phase,
    pointee,
    reduction_diff,
    size_param,
    vector_load,
    vector_reduction_diff,
)

__all__ += [
    "GRID_STRIDE_PREFIX",
    "VECTORS",
    "VectorLoad",
    "buffer_uses",
    "elementwise_diff",
    "elementwise_vector_diff",
    "grid_bound",
    "hidden_block_reads",
    "index_offset",
    "is_grid_stride",
    "launch_specific",
    "load_phase",
    "pointee",
    "reduction_diff",
    "size_param",
    "vector_load",
    "vector_reduction_diff",
]

# GA204: the tree reduction's load phase in the source, and the half-block rewrite
from gpuadvise.rules.idle_tree import (  # noqa: E402
    IdleMatch,
    find_idle_loads,
    first_add_diff,
    half_grid_variant,
)

__all__ += ["IdleMatch", "find_idle_loads", "first_add_diff", "half_grid_variant"]
