"""Launch orders of a 2D grid for the L2 model: the hardware's row-major order, seed 002's
thread-group tilings (:func:`tiled_order`), column-major, or any permutation a rule proposes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuadvise.errors import UsageError

__all__ = [
    "DEFAULT_ORDERS",
    "OrderSpec",
    "order_permutation",
    "tiled_order",
]

# A launch order: "row-major" | "column-major" | ("tile-x" | "tile-y", N) | an array | (name, array)
OrderSpec = str | tuple[str, Any] | np.ndarray

DEFAULT_ORDERS: tuple[OrderSpec, ...] = (
    "row-major",
    ("tile-x", 4),
    ("tile-x", 8),
    ("tile-x", 16),
    ("tile-x", 32),
)


def tiled_order(grid_x: int, grid_y: int, n: int, axis: str = "x") -> np.ndarray:
    """Seed 002's thread-group tiling: ``(P, 2)`` int64, launch position -> remapped CTA ``(x, y)``.

    ``axis="x"``: the grid is cut into tiles of ``n`` CTAs by ``grid_y`` (the last one ``grid_x % n``
    wide); tiles are launched left to right and each tile row-major. This is the corrected HLSL
    snippet of the seed (L. Bavoil, A. Ukarande): launch position ``L = y * grid_x + x``, tile
    ``L // (n * grid_y)``, local index ``L % (n * grid_y)`` split by the tile width (``n``, or
    ``grid_x % n`` in the last, partial tile). ``axis="y"`` is the transposed scheme: tiles of
    ``grid_x`` by ``n`` rows launched top to bottom, each column-major (``n`` CTAs down, then the
    next column). ``n >= grid_x`` (x) and ``n == 1`` (y) give row-major; ``n == 1`` (x) gives
    column-major.
    """
    if n < 1:
        raise ValueError("the tile size must be at least 1")
    if grid_x < 1 or grid_y < 1:
        raise ValueError("the grid must have at least one CTA in x and y")
    if axis not in ("x", "y"):
        raise ValueError("axis must be 'x' or 'y'")
    gx, gy = int(grid_x), int(grid_y)
    flat = np.arange(gx * gy, dtype=np.int64)
    if axis == "x":
        per_tile = n * gy
        full = (gx // n) * per_tile
        width = np.where(flat >= full, gx % n, n)  # gx % n > 0 wherever flat >= full
        tile, local = flat // per_tile, flat % per_tile
        x = tile * n + local % width
        y = local // width
    else:
        per_tile = n * gx
        full = (gy // n) * per_tile
        height = np.where(flat >= full, gy % n, n)
        tile, local = flat // per_tile, flat % per_tile
        x = local // height
        y = tile * n + local % height
    return np.stack([x, y], axis=1)


_EACH_ONCE = "list every CTA of the grid exactly once (a permutation of 0 .. N-1)"


def _perm_from_array(arr: Any, gx: int, gy: int) -> np.ndarray:
    a = np.asarray(arr)
    total = gx * gy
    if a.ndim == 2 and a.shape[1] == 2:
        x, y = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64)
        if (x < 0).any() or (x >= gx).any() or (y < 0).any() or (y >= gy).any():
            raise UsageError(
                "a launch order names a CTA outside the grid", "give CTAs (x, y) of the grid"
            )
        lin = x + y * gx
    elif a.ndim == 1:
        lin = a.astype(np.int64)
    else:
        raise UsageError(
            "a launch order is an array of CTA (x, y) pairs or of linear CTA ids",
            "give an N x 2 array of (x, y), or N linear ids",
        )
    if len(lin) != total or (lin < 0).any() or (lin >= total).any():
        raise UsageError(f"a launch order must list each of the {total} CTAs once", _EACH_ONCE)
    seen = np.zeros(total, dtype=bool)
    seen[lin] = True
    if not seen.all():
        raise UsageError(f"a launch order must list each of the {total} CTAs once", _EACH_ONCE)
    return lin


def order_permutation(
    spec: OrderSpec, grid_x: int, grid_y: int
) -> tuple[str, int | None, np.ndarray]:
    """(name, n, launch position -> linear CTA id) of an order on a ``grid_x`` by ``grid_y`` grid."""
    gx, gy = int(grid_x), int(grid_y)
    if isinstance(spec, str):
        if spec == "row-major":
            return "row-major", None, np.arange(gx * gy, dtype=np.int64)
        if spec == "column-major":
            xy = tiled_order(gx, gy, 1, "x")
            return "column-major", None, xy[:, 0] + xy[:, 1] * gx
        raise UsageError(
            f"unknown launch order {spec!r}",
            "use 'row-major', 'column-major', ('tile-x', N), ('tile-y', N) or an array",
        )
    if isinstance(spec, np.ndarray):
        return "custom", None, _perm_from_array(spec, gx, gy)
    if isinstance(spec, tuple) and len(spec) == 2:
        name, arg = spec
        if name in ("tile-x", "tile-y"):
            n = int(arg)
            if n < 1:
                raise UsageError(f"tile size {arg} must be at least 1", "e.g. ('tile-x', 8)")
            xy = tiled_order(gx, gy, n, name[-1])
            return str(name), n, xy[:, 0] + xy[:, 1] * gx
        return str(name), None, _perm_from_array(arg, gx, gy)
    raise UsageError(
        f"cannot read launch order {spec!r}",
        "use 'row-major', 'column-major', ('tile-x', N), ('tile-y', N) or an array",
    )
