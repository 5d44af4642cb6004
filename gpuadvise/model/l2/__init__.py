"""L2 model: hit rate and DRAM traffic of a launch under a CTA launch order, and which order is best.

Seed 002 (thread-group ID tiling) gained 47% on an RTX 2080 with 4 MB of L2; on an H100 with 50 MB the
same remap is 2.5% slower when the working set fits anyway and up to 16% faster when it does not
(HARDWARE.md section 4). This model tells which case a kernel is in before anything is measured: it
replays the global-memory footprint of every CTA in a given launch order and predicts, per order, the
working set of the CTAs in flight, whether it fits, the L2 sector hit rate and the DRAM bytes.

Orders: ``"row-major"`` (the hardware's: blockIdx.x fastest), ``("tile-x", N)`` / ``("tile-y", N)``
(seed 002's remap, partial last tile included: :func:`tiled_order`), ``"column-major"``, or any
permutation a rule proposes (an array: launch position -> CTA (x, y), or -> linear CTA id).

The model (its assumptions are also in :data:`ASSUMPTIONS`, which the result carries):

- CTAs start in launch order and retire roughly in order; ``C = blocks_per_sm * sm_count`` run at once.
- L1 absorbs the repeats of one CTA: each CTA sends one L2 request per distinct 32-byte sector it
  touches. There is no L1 reuse across CTAs.
- L2: one fully associative LRU cache of ``efficiency * l2_bytes`` bytes, filled in ``fetch_bytes``
  granules (64 bytes, a sector pair, on the GPUs with two partitions below, else 32-byte sectors).
  A CTA's access to a granule hits when the distinct bytes touched by the CTAs launched from the
  granule's previous toucher up to this CTA fit in that capacity: an LRU stack distance measured at
  CTA granularity (a sliding window, not discrete waves). The first touch of a granule misses, and
  so does the first touch after the window stops fitting: each miss starts a *residency* of the
  granule, which lasts until the next miss.
- Two partitions (A100, H100, H200, B200: compute capabilities 8.0, 9.0, 10.x). The L2 is split in
  two; every granule has a home partition (the one by its memory controller, by address), and
  each SM is wired to one partition: half of the SMs to each. A request from an SM on the home side
  is looked up at home; one from the other side is looked up in the SM's near partition, which
  keeps copies of the far granules its SMs read, and when that misses it is forwarded over the
  L2 fabric and looked up again at home (``fetch_bytes / 32`` sectors, a granule). So data read
  from both sides is held twice (the default efficiency is 0.5 there; 0.85 on GPUs with one L2:
  set associativity, address hashing and a replacement policy that is not exactly LRU), and
  Nsight Compute's ``lts__t_sector_hit_rate`` counts more lookups and more misses than one cache
  would, DRAM traffic unchanged: per residency of ``k`` CTAs, whose missing CTA requests ``a``
  sectors of a granule of ``g``, with each CTA on either side with probability 1/2 (CTAs go to
  SMs regardless of their tile), the expected extra misses are ``g/2 + a/2 (1 - 2**(1 - k))``
  (the first toucher is on the far side: it misses near and at home; else the first far-side
  toucher misses its near copy, about ``a`` sectors) and the extra lookups, the forwarded
  sectors (``lts__t_sectors_srcunit_ltcfabric``), ``g (1 - 2**-k)``. Both partitions are
  assumed to keep a granule for the same residencies (each sees the same mix of requests). A store
  from the far side is looked up in both partitions: stores count 1.5 lookups, all hits. The
  near and home partition lookups of a residency share its LRU decision; no other parameter is
  added. Validated on an H100 (``benchmarks/l2_gather``, docs/validation.md): the one-cache model
  overestimated the hit rate by up to 13 points where the working set does not fit (DRAM bytes
  right); with the partitions, 70 of 70 launches within 5 points (mean 0.6) and the predicted
  forwarded sectors within 25% of the measured ones. The 64-byte fill was chosen on those data:
  with 8x8 blocks, whose warps request one sector of a granule, Nsight counts about half the misses
  per DRAM sector of 16x16 blocks, whose warps request both (a pair-sized fill makes the request
  for the other sector of a pair hit); with 32-byte fills one launch (4K, 8x8, R=1024) was 8
  points off. ``partitions=1`` gives the one-cache model.
- Stores allocate without reading DRAM and every stored sector counts as an L2 hit (as Nsight
  Compute's ``lts__t_sector_hit_rate`` counts them); stored data takes cache space; DRAM writes are
  the distinct stored sectors, each written back once (an upper bound on what a kernel writes back
  before it ends). Atomics and reductions are read requests (they can miss) that dirty the sector.
- The L2 is cold at kernel start (Nsight Compute flushes it before each replay).
- Not modelled: L1 reuse between CTAs that share an SM (Nsight counts 5-30% fewer L2 requests than
  the model on the validation gathers, so the measured hit rate is lower by up to 4 points where
  many requests miss), requests that wait for a fill already under way (counted as hits), and a
  near copy evicted before the home one.

``hit_rate`` counts loads and stores (comparable to ``lts__t_sector_hit_rate.pct`` / 100, the
forwarded lookups of two partitions included); ``read_hit_rate`` loads only
(``lts__t_sector_op_read_hit_rate``). ``dram_bytes`` is DRAM reads (``dram__bytes_read.sum``):
missed granules times ``fetch_bytes``. ``fabric_sectors``: the sectors forwarded between the two
partitions (``lts__t_sectors_srcunit_ltcfabric``).

Untraced CTAs. A trace usually covers some CTAs (sampled waves). For a 2D grid whose CTAs touch
translated copies of one footprint (image kernels), the model infers the per-CTA translation of
every buffer (byte steps per CTA in x and y: the most common difference between corresponding lane
addresses of neighbouring traced CTAs), the row pitch (the y step over ``block.y`` rows), a
footprint template relative to the CTA origin (taken from a traced CTA whose accesses stay clear
of the buffer's edges, so not clamped; one template per phase when a CTA step is not a whole number
of granules), checks that the traced CTAs whose translated template stays inside the buffer touch
exactly the template (all of them, or runs of consecutive CTAs spread over a large trace), and
synthesizes every CTA of the grid. Accesses of edge CTAs that fall outside the buffer are clamped
to its edge, or dropped: whichever reproduces the traced edge CTAs better (a note says how well
when it is not exact). A buffer read identically by every CTA (a filter, a table) is synthesized
as such. When any of this fails (no constant step, a CTA that is not a translate of its
neighbours, no traced CTA clear of the edges: a first-wave trace of a kernel whose footprint
reaches further than the first CTA rows) the model falls back to the traced CTAs only (their
footprints replayed at their launch positions, windows scaled by the sampled fraction, DRAM bytes
extrapolated) and says why in ``notes``. A complete trace is replayed as it is.

Speed. Granules touched by exactly the same set of CTAs (by translation symmetry, all granules of
one residue class modulo the CTA steps with the same pattern of touchers) are merged into units:
an image kernel's footprint then has one unit per neighbouring CTA tile it reads, not one per
sector. Units on the edge that receive clamped accesses are split by which CTAs land on which of
their granules, so edge CTAs touch exactly what they read. Per order, each unit's touchers are
sorted by launch position (a row sort of a fixed-width matrix, no global sort), the previous
toucher gives each touch its reuse gap, and the distinct bytes of every window ``[p - k, p)`` come
from difference arrays over the gaps longer than ``k``, for a geometric grid of ``k`` starting
where a window surely fits (linear interpolation in between). On the traces of
``tests/model/test_l2.py`` this agrees with an exact LRU replay of the same footprints to within a
fraction of a point of hit rate.

The package: :mod:`~gpuadvise.model.l2.orders` (launch orders), :mod:`~gpuadvise.model.l2.footprint`
(the (CTA, granule) pairs of a trace and the units the replay reads),
:mod:`~gpuadvise.model.l2.synthesis` (the untraced CTAs), :mod:`~gpuadvise.model.l2.replay` (the
cache simulation and the device's cache parameters), :mod:`~gpuadvise.model.l2.results` (result
types), :mod:`~gpuadvise.model.l2.predict` (the entry points). Pure numpy: no I/O, no CUDA text
(the CUDA remap of a tiled order is :func:`gpuadvise.source.patch.tiled_block_index_lines`).
"""

from __future__ import annotations

from gpuadvise.model.l2.orders import DEFAULT_ORDERS, OrderSpec, order_permutation, tiled_order
from gpuadvise.model.l2.predict import l2_model, l2_models
from gpuadvise.model.l2.replay import default_efficiency, default_fetch_bytes, default_partitions
from gpuadvise.model.l2.results import ASSUMPTIONS, L2OrderResult, L2Result

__all__ = [
    "ASSUMPTIONS",
    "DEFAULT_ORDERS",
    "L2OrderResult",
    "L2Result",
    "OrderSpec",
    "default_efficiency",
    "default_fetch_bytes",
    "default_partitions",
    "l2_model",
    "l2_models",
    "order_permutation",
    "tiled_order",
]
