"""The rule API: what a rule file in ``rules/`` imports (and nothing else but gpuadvise.errors).

This list is what the rule files use, and nothing more (issue 30): the rule's anatomy (Rule,
Finding, Evidence, Estimate, Variant, FindingDetails, RuleContext, ModelUnavailable, from
:mod:`~gpuadvise.rules.rule`, :mod:`~gpuadvise.rules.findings`, :mod:`~gpuadvise.rules.details`
and :mod:`~gpuadvise.rules.context`), and what rules compute with: the trace's enums and
lane-level view, the pure models' helpers, the one roofline and the estimates, the source
helpers and rewriting (the fix kit), the layout proxies, struct layouts and demanded bits, and
the helpers of one rule family each (repeats, atomics, staging, transpose, scalar runs,
grid-stride loops, register pressure ...). A rule file imports them from here, never from the
modules that define them (checked by tests/rules/test_rule_imports.py), so that the API a rule
sees is this one list. The engine's own machinery is not part of it: the analysis and the
tests import it from the modules of this package that hold it (the registry,
:mod:`~gpuadvise.rules.registry`; the run, :mod:`~gpuadvise.rules.evaluate`; ranking,
:mod:`~gpuadvise.rules.ranking`; measurements and the findings' JSON,
:mod:`~gpuadvise.rules.findings`). A name goes in here when a rule file needs it.
"""

from gpuadvise.arrays import distinct
from gpuadvise.devices import memory_rates
from gpuadvise.model.banks import active_lanes, record_wavefronts
from gpuadvise.model.coalescing import touched_lines
from gpuadvise.model.l2 import l2_model
from gpuadvise.model.occupancy import OccupancyInputError, max_active_blocks
from gpuadvise.model.reduction import ReductionTree
from gpuadvise.model.roofline import (
    Traffic,
    amortised_ratio,
    ceiling_s,
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
from gpuadvise.ptx.errors import PtxParseError
from gpuadvise.ptx.parser import parse_ptx_cached
from gpuadvise.rules import walks  # GA301's family: a line's address streams and their patterns
from gpuadvise.rules.atomics import (
    ATOMICS,
    Contention,
    cas_lines,
    contended_lines,
    serial_updates,
    warp_aggregable,
    warp_aggregation_variant,
    with_serial_updates,
)
from gpuadvise.rules.bank_layout import (
    Layout,
    Padded,
    SharedVar,
    cost,
    remap,
    shared_layout,
    source_name,
)
from gpuadvise.rules.bank_padding import (
    ArrayDecl,
    PadPlan,
    find_array_decl,
    padding_diff,
    plan_padding,
    unsafe_use,
)
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.demanded_bits import load_widths
from gpuadvise.rules.details import FindingDetails
from gpuadvise.rules.estimates import (
    MODEL,
    buffer_records,
    fp64_to_fp32_estimate,
    issue_change_estimate,
    kernel_launch_times,
    l1_roofline_estimate,
    launch_change_estimate,
    repeated_requests,
    shared_wavefront_estimate,
    view_traffic,
)
from gpuadvise.rules.findings import Estimate, Evidence, Finding, Variant
from gpuadvise.rules.global_atomics import HotAddress, hot_addresses, update_ns
from gpuadvise.rules.grid_stride import PREFIX as GRID_STRIDE_PREFIX
from gpuadvise.rules.grid_stride import (
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
from gpuadvise.rules.idle_tree import IdleMatch, find_idle_loads, first_add_diff, half_grid_variant
from gpuadvise.rules.lanes import uniform_lanes
from gpuadvise.rules.launch_reuse import (
    LaunchReuse,
    LaunchWide,
    cap_dram_at_footprint,
    launch_reuse,
    launch_wide,
    tile_estimate,
)
from gpuadvise.rules.narrow_fix import narrow_variant
from gpuadvise.rules.narrow_loads import narrow_estimate, narrow_loads
from gpuadvise.rules.one_element import (
    COMBINES,
    PER_ITERATION,
    OneElement,
    advice,
    elements,
    kind_text,
    one_element_variant,
    report_line,
)
from gpuadvise.rules.pressure import (
    MOVE_LOAD,
    PressurePlan,
    Shortening,
    move_declarations,
    pressure_plan,
)
from gpuadvise.rules.proxy import (
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
from gpuadvise.rules.reload_advice import (
    coalesced_lanes,
    reload_message,
    reload_variant,
    wide_pass,
)
from gpuadvise.rules.repeats import (
    MIN_ACCUMULATION_REPEATS,
    accumulation_reloads,
    accumulations,
    l1_bytes_left,
    later_repeats,
    reload_costs,
    removable_records,
    same_thread_reloads,
    thread_keys,
    varying_repeats,
    whole_records,
)
from gpuadvise.rules.rule import Rule
from gpuadvise.rules.scalar_runs import (
    SCALAR_NOTE_BELOW,
    PieceGroup,
    global_totals,
    piece_buffer,
    piece_numbers,
    piece_site,
    sass_at,
    scalar_pieces,
    scalar_run_estimate,
)
from gpuadvise.rules.scans import (
    ScanChange,
    scans_of,
    shuffled_estimate,
    tree_tail_change,
    with_scan_shuffled,
)
from gpuadvise.rules.small_grid import small_grid_estimate
from gpuadvise.rules.staging import plan_direct_reads, staged_tiles
from gpuadvise.rules.structs import struct_for
from gpuadvise.rules.transpose import (
    copy_statement,
    find_transposition,
    index_parameters,
    transpose_body,
    transpose_tiles,
)
from gpuadvise.rules.vectorize import vector_rewrite
from gpuadvise.source import fixkit  # the operations fixes are made of (issue 28)
from gpuadvise.source.edit import unified_diff
from gpuadvise.source.patch import (
    PatchError,
    block_index_uses,
    remap_block_index,
    tiled_block_index_cuda,
    tiled_block_index_lines,
)
from gpuadvise.source.signature import parse_signature
from gpuadvise.source.text import KernelSource, line_of, split_top
from gpuadvise.source.tree import Expr
from gpuadvise.toolchain.sass import halfword_prmt, one_lane_fp16, same_source_file
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space, distinct_records, record_weights
from gpuadvise.trace.view import cta_reuse, field_loads, integer_args, stride_mode, warp_footprint
from gpuadvise.words import counted, lines_text

__all__ = [
    "AccessTrace",
    "accumulation_reloads",
    "accumulations",
    "active_lanes",
    "advice",
    "amortised_ratio",
    "ArrayDecl",
    "ATOMICS",
    "block_index_uses",
    "buffer_records",
    "buffer_uses",
    "cas_lines",
    "COMBINES",
    "contended_lines",
    "Contention",
    "copy_statement",
    "cost",
    "counted",
    "cta_reuse",
    "distinct",
    "distinct_records",
    "dram_bytes_per_s",
    "elements",
    "elementwise_diff",
    "elementwise_vector_diff",
    "Estimate",
    "Evidence",
    "Expr",
    "field_loads",
    "find_array_decl",
    "find_idle_loads",
    "find_transposition",
    "Finding",
    "FindingDetails",
    "first_add_diff",
    "fixkit",
    "fp64_to_fp32_estimate",
    "global_totals",
    "grid_bound",
    "GRID_STRIDE_PREFIX",
    "half_grid_variant",
    "halfword_prmt",
    "hidden_block_reads",
    "hot_addresses",
    "HotAddress",
    "IdleMatch",
    "index_offset",
    "index_parameters",
    "integer_args",
    "is_grid_stride",
    "issue_change_estimate",
    "kernel_launch_times",
    "KernelSource",
    "Kind",
    "kind_text",
    "l1_cycles",
    "l1_roofline_estimate",
    "l2_model",
    "l1_bytes_left",
    "later_repeats",
    "launch_change_estimate",
    "launch_reuse",
    "LaunchReuse",
    "LaunchWide",
    "launch_wide",
    "cap_dram_at_footprint",
    "tile_estimate",
    "launch_estimate",
    "launch_specific",
    "launch_times",
    "Layout",
    "line_of",
    "lines_text",
    "load_phase",
    "load_widths",
    "max_active_blocks",
    "memory_rates",
    "merge_stores",
    "MIN_ACCUMULATION_REPEATS",
    "MODEL",
    "ModelUnavailable",
    "move_declarations",
    "MOVE_LOAD",
    "narrow_estimate",
    "narrow_loads",
    "narrow_variant",
    "occupancy_ratio",
    "OccupancyInputError",
    "one_element_variant",
    "one_lane_fp16",
    "OneElement",
    "packed_proxy",
    "Padded",
    "padding_diff",
    "PadPlan",
    "parse_ptx_cached",
    "parse_signature",
    "PatchError",
    "PER_ITERATION",
    "piece_buffer",
    "piece_numbers",
    "piece_site",
    "PieceGroup",
    "plan_direct_reads",
    "plan_packing",
    "plan_padding",
    "pointee",
    "pressure_plan",
    "PressurePlan",
    "proxy_where",
    "PtxParseError",
    "record_wavefronts",
    "record_weights",
    "reduction_diff",
    "ReductionTree",
    "reload_costs",
    "reload_message",
    "reload_variant",
    "coalesced_lanes",
    "wide_pass",
    "remap",
    "remap_block_index",
    "removable_records",
    "repeated_requests",
    "report_line",
    "roofline",
    "Rule",
    "RuleContext",
    "same_source_file",
    "same_thread_reloads",
    "sass_at",
    "SCALAR_NOTE_BELOW",
    "scalar_pieces",
    "scalar_run_estimate",
    "ScanChange",
    "scans_of",
    "serial_updates",
    "shared_layout",
    "shared_wavefront_estimate",
    "SharedVar",
    "Shortening",
    "size_param",
    "sm_cycles_per_s",
    "soa_description",
    "soa_proxy",
    "source_name",
    "source_text",
    "Space",
    "split_top",
    "staged_tiles",
    "stride_mode",
    "struct_for",
    "thread_keys",
    "tile_pitch",
    "tile_proxy",
    "tiled_block_index_cuda",
    "tiled_block_index_lines",
    "touched_lines",
    "Traffic",
    "transpose_body",
    "transpose_tiles",
    "unified_diff",
    "uniform_lanes",
    "unsafe_use",
    "update_ns",
    "Variant",
    "varying_repeats",
    "vector_load",
    "vector_reduction_diff",
    "vector_rewrite",
    "VectorLoad",
    "VECTORS",
    "view_traffic",
    "walks",
    "WARP",
    "warp_aggregable",
    "warp_aggregation_variant",
    "warp_footprint",
    "whole_records",
    "with_floor",
    "ceiling_s",
    "small_grid_estimate",
    "shuffled_estimate",
    "tree_tail_change",
    "with_scan_shuffled",
    "with_serial_updates",
    "work_ratio",
]
