"""Output verification: poisoning outputs before a run, and comparing outputs between runs.

Poison. :func:`poison` sets every byte of a buffer to 0xFF. For IEEE floats of every width that
pattern is a NaN (all exponent bits set, a non-zero mantissa), so a float element the kernel did not
write compares as NaN against the reference number and is caught; integers, bools and raw struct
bytes read as all-ones. It is the same pattern ``cuMemsetD8(ptr, 0xFF, n)`` leaves on the device, so
poisoning on the host and on the GPU are interchangeable. The all-ones NaN (0xFFFFFFFF for float32)
differs from the NaN that arithmetic produces (0x7FFFFFFF on NVIDIA GPUs, 0xFFC00000 on x86), which
lets :func:`unwritten` count the elements a kernel left alone without counting NaNs it computed.

Compare. :func:`compare` checks an output against the reference run's: integers, bools and raw bytes
exactly, floats with ``|actual - expected| <= atol + rtol * |expected|`` (as ``numpy.isclose``),
where NaN equals NaN (both runs computing the same NaN is fine) but NaN against a number is a
mismatch, and infinities must match exactly. Structured dtypes are compared field by field. Errors
are computed in float64 (float16 and float32 included), and in chunks so that large buffers do not
need several float64 copies at once.

Totals. :func:`compare_totals` checks an output of per-block partial results (a reduction's
``out[blockIdx.x]``) whose count changes with the grid: the combined total (``+``, ``max`` or
``min``) of the first ``gridDim.x`` elements each launch wrote. Integers are combined in their own
width with wrap-around (as the kernel's adds wrap), so sums are exact whatever the grouping; floats
are summed in float64 and allowed ``atol + max(rtol, eps * count) * sum(|partial|)``, ``eps`` the
type's machine epsilon and ``count`` the larger number of partials (a different grouping of the
additions: the bound of recursive summation). :func:`compare_outputs` compares every output of
two runs, as totals where a variant says so.

Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuadvise.errors import UsageError

__all__ = [
    "POISON_BYTE",
    "TOTAL_OPS",
    "Comparison",
    "bit_identical",
    "compare",
    "compare_outputs",
    "compare_totals",
    "poison",
    "unwritten",
]

TOTAL_OPS = ("+", "max", "min")
"""The combine ops :func:`compare_totals` knows."""

POISON_BYTE = 0xFF
# Elements are compared in chunks of about this many bytes of input.
_CHUNK_BYTES = 4 << 20

Scalar = float | int | bool | str | None


# --- poison -----------------------------------------------------------------------------------


def _byte_view(arr: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """A writable uint8 view of a C- or Fortran-contiguous array's memory."""
    flat = arr if arr.flags.c_contiguous else arr.T
    return flat.reshape(-1).view(np.uint8)


def poison(arr: npt.NDArray[Any]) -> None:
    """Fill ``arr`` in place with 0xFF bytes: NaN in every float (and float field), all-ones else.

    Works on any writable array, contiguous or not (a strided view is filled through a poisoned
    copy; there the padding bytes of structs may keep their old values). Object arrays are refused.
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"poison needs a numpy array, not {type(arr).__name__}")
    if arr.dtype.hasobject:
        raise TypeError("poison: object arrays cannot be poisoned")
    if not arr.flags.writeable:
        raise ValueError("poison: the array is read-only")
    if arr.size == 0 or arr.dtype.itemsize == 0:
        return
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        _byte_view(arr)[...] = POISON_BYTE
        return
    template = np.empty(arr.shape, dtype=arr.dtype)
    _byte_view(template)[...] = POISON_BYTE
    # Same dtype: numpy copies the bytes as they are (NaN payloads and padding included).
    np.copyto(arr, template, casting="no")


def _field_bytes(dtype: np.dtype[Any]) -> npt.NDArray[np.bool_]:
    """Which bytes of a structured dtype's item belong to a field (the rest is padding)."""
    mask = np.zeros(dtype.itemsize, dtype=bool)

    def mark(dt: np.dtype[Any], offset: int) -> None:
        if dt.names is None:
            if dt.subdtype is not None and dt.subdtype[0].names is not None:
                base = dt.subdtype[0]
                for i in range(dt.itemsize // max(1, base.itemsize)):
                    mark(base, offset + i * base.itemsize)
            else:
                mask[offset : offset + dt.itemsize] = True
            return
        for name in dt.names:
            sub, sub_offset = dt.fields[name][:2]  # type: ignore[index]
            mark(sub, offset + sub_offset)

    mark(dtype, 0)
    return mask


def unwritten(arr: npt.NDArray[Any]) -> int:
    """How many elements of ``arr`` still hold the poison (every byte 0xFF).

    For a float output this counts the poison NaN only, not NaNs the kernel computed. For integer
    outputs it cannot tell the poison from a written all-ones value (-1 for signed types, the
    maximum for unsigned ones), so treat a count there as a hint. A struct counts as unwritten
    when all the bytes of all its fields are 0xFF (padding is ignored).
    """
    arr = np.asarray(arr)
    size = arr.dtype.itemsize
    if arr.size == 0 or size == 0:
        return 0
    flat = arr.reshape(-1)
    rows = max(1, _CHUNK_BYTES // size)
    fields = _field_bytes(arr.dtype) if arr.dtype.names is not None else None
    count = 0
    for start in range(0, flat.size, rows):
        chunk = np.ascontiguousarray(flat[start : start + rows])
        if fields is not None:
            raw = chunk.view(np.uint8).reshape(chunk.size, size)[:, fields]
            count += int(np.count_nonzero(np.all(raw == POISON_BYTE, axis=1)))
        elif size in (1, 2, 4, 8):
            words = chunk.view(np.dtype(f"u{size}"))
            count += int(np.count_nonzero(words == np.iinfo(words.dtype).max))
        else:
            raw = chunk.view(np.uint8).reshape(chunk.size, size)
            count += int(np.count_nonzero(np.all(raw == POISON_BYTE, axis=1)))
    return count


# --- compare ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """The result of comparing one output buffer with its reference.

    ``n_elements`` counts elements of the array (structs for a structured dtype), ``n_mismatch``
    those with at least one value out of tolerance. ``max_abs_err`` and ``max_rel_err`` are taken
    over all elements, within tolerance or not (``inf`` for NaN against a number, mismatched
    infinities, or differing raw bytes; ``max_rel_err`` is ``inf`` where the expected value is 0
    and the actual one is not). ``worst_index`` is the flat (C-order) index of the largest error
    among the mismatches, or among all elements when none mismatch; ``None`` when every value is
    identical. ``expected_value`` / ``actual_value`` are the values there (raw bytes as hex), and
    ``field`` names the structured field (``"a.b"`` nested, ``"v[2]"`` inside a subarray) they
    belong to.
    """

    name: str
    ok: bool
    n_elements: int
    n_mismatch: int
    max_abs_err: float
    max_rel_err: float
    worst_index: int | None
    expected_value: Scalar
    actual_value: Scalar
    message: str
    field: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "n_elements": self.n_elements,
            "n_mismatch": self.n_mismatch,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "worst_index": self.worst_index,
            "expected_value": self.expected_value,
            "actual_value": self.actual_value,
            "message": self.message,
            "field": self.field,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Comparison:
        return cls(
            name=str(d["name"]),
            ok=bool(d["ok"]),
            n_elements=int(d["n_elements"]),
            n_mismatch=int(d["n_mismatch"]),
            max_abs_err=float(d["max_abs_err"]),
            max_rel_err=float(d["max_rel_err"]),
            worst_index=None if d.get("worst_index") is None else int(d["worst_index"]),
            expected_value=d.get("expected_value"),
            actual_value=d.get("actual_value"),
            message=str(d["message"]),
            field=d.get("field"),
        )


@dataclass(frozen=True)
class _Leaf:
    """Per-value results of one leaf field over a chunk: shape (rows, values per element)."""

    mismatch: npt.NDArray[np.bool_]
    abs_err: npt.NDArray[np.float64]
    rel_err: npt.NDArray[np.float64]


def _leaves(
    e: npt.NDArray[Any], a: npt.NDArray[Any], label: str | None
) -> Iterator[tuple[str | None, npt.NDArray[Any], npt.NDArray[Any]]]:
    """The leaf (non-structured) fields of 2-D arrays (rows, k), each reshaped to (rows, k')."""
    names = e.dtype.names
    if names is None:
        yield label, e, a
        return
    rows = e.shape[0]
    for name in names:
        ef = e[name].reshape(rows, -1)
        af = a[name].reshape(rows, -1)
        yield from _leaves(ef, af, name if label is None else f"{label}.{name}")


def _compare_float(e: npt.NDArray[Any], a: npt.NDArray[Any], rtol: float, atol: float) -> _Leaf:
    if e.dtype.kind == "c":
        work: type[np.generic] = np.complex128 if e.dtype.itemsize <= 16 else np.clongdouble
    else:
        work = np.float64 if e.dtype.itemsize <= 8 else np.longdouble
    ew = e.astype(work)
    aw = a.astype(work)
    with np.errstate(all="ignore"):
        equal = (ew == aw) | (np.isnan(ew) & np.isnan(aw))
        finite = np.isfinite(ew) & np.isfinite(aw)
        diff = np.abs(aw - ew)
        mag = np.abs(ew)
        within = equal | (finite & (diff <= atol + rtol * mag))
        abs_err = np.where(equal, 0.0, np.where(finite, diff, np.inf)).astype(np.float64)
        rel_err = np.where(abs_err == 0.0, 0.0, abs_err / mag.astype(np.float64))
    return _Leaf(~within, abs_err, rel_err.astype(np.float64))


def _compare_int(e: npt.NDArray[Any], a: npt.NDArray[Any]) -> _Leaf:
    wide = np.int64 if e.dtype.kind == "i" else np.uint64
    ew = e.astype(wide)
    aw = a.astype(wide)
    mismatch = ew != aw
    # |a - e| exactly, in uint64 arithmetic (modular subtraction of the larger minus the smaller).
    eu = ew.view(np.uint64)
    au = aw.view(np.uint64)
    diff = np.where(aw >= ew, au - eu, eu - au)
    abs_err = diff.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_err = np.where(abs_err == 0.0, 0.0, abs_err / np.abs(ew.astype(np.float64)))
    return _Leaf(mismatch, abs_err, rel_err)


def _compare_bytes(e: npt.NDArray[Any], a: npt.NDArray[Any]) -> _Leaf:
    size = e.dtype.itemsize
    eb = np.ascontiguousarray(e).view(np.uint8).reshape(*e.shape, size)
    ab = np.ascontiguousarray(a).view(np.uint8).reshape(*a.shape, size)
    mismatch = np.any(eb != ab, axis=-1)
    err = np.where(mismatch, np.inf, 0.0)
    return _Leaf(mismatch, err, err)


def _compare_leaf(e: npt.NDArray[Any], a: npt.NDArray[Any], rtol: float, atol: float) -> _Leaf:
    kind = e.dtype.kind
    if kind in "fc":
        return _compare_float(e, a, rtol, atol)
    if kind in "iu":
        return _compare_int(e, a)
    if kind == "b":
        return _compare_int(e.astype(np.uint8), a.astype(np.uint8))
    return _compare_bytes(e, a)  # raw void, strings, datetimes: exact, byte for byte


def _py_value(v: np.generic) -> Scalar:
    kind = v.dtype.kind
    if kind == "b":
        return bool(v)
    if kind in "iu":
        return int(v)
    if kind == "f":
        return float(v)
    if kind == "c":
        return str(v)
    if kind == "V":
        return "0x" + bytes(np.asarray(v).tobytes()).hex()
    return str(v)


def _show_value(v: np.generic) -> str:
    """The shortest text that reads back as this value in its own dtype (1.2531 for a float32)."""
    if v.dtype.kind == "V":
        return "0x" + np.asarray(v).tobytes().hex()
    return str(v)


def _fmt_err(x: float) -> str:
    """3.1e-3, 0.25, 12, 4.2e+6: two significant digits, short exponents."""
    if x == 0.0 or not math.isfinite(x):
        return str(x) if x else "0"
    if 1e-2 <= abs(x) < 1e4:
        return f"{x:.2g}"
    mant, exp = f"{x:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def _check_tolerance(rtol: float, atol: float) -> None:
    for what, value in (("rtol", rtol), ("atol", atol)):
        if not (math.isfinite(value) and value >= 0.0):
            raise UsageError(
                f"{what} must be a finite number >= 0 (got {value})", "e.g. rtol=1e-5, atol=1e-8"
            )


def bit_identical(expected: npt.NDArray[Any], actual: npt.NDArray[Any]) -> bool:
    """Whether two arrays have one shape and dtype and hold the same bytes (compared a chunk at
    a time: no array-sized temporary)."""
    if expected is actual:
        return True
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    e = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)
    a = np.ascontiguousarray(actual).reshape(-1).view(np.uint8)
    step = _CHUNK_BYTES
    return all(np.array_equal(e[i : i + step], a[i : i + step]) for i in range(0, len(e), step))


def compare(
    name: str,
    expected: npt.NDArray[Any],
    actual: npt.NDArray[Any],
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> Comparison:
    """Compare ``actual`` with ``expected`` (see the module docstring for the rules)."""
    _check_tolerance(rtol, atol)
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    n = int(expected.size)

    problems = []
    if expected.shape != actual.shape:
        problems.append(f"shape {actual.shape} differs from the expected {expected.shape}")
    if expected.dtype != actual.dtype:
        problems.append(f"dtype {actual.dtype} differs from the expected {expected.dtype}")
    if not problems and expected.dtype.hasobject:
        problems.append("object arrays cannot be compared")
    if problems:
        return Comparison(
            name=name,
            ok=False,
            n_elements=n,
            n_mismatch=n,
            max_abs_err=math.inf,
            max_rel_err=math.inf,
            worst_index=None,
            expected_value=None,
            actual_value=None,
            message=f"{name}: " + "; ".join(problems),
        )

    if bit_identical(expected, actual):
        # what the element-wise pass below finds for identical bytes, without its float64
        # copies (a 133 MB output took 2.3 s to compare; tiling and launch-order variants
        # write the very same bits)
        return Comparison(
            name=name,
            ok=True,
            n_elements=n,
            n_mismatch=0,
            max_abs_err=0.0,
            max_rel_err=0.0,
            worst_index=None,
            expected_value=None,
            actual_value=None,
            message=f"{name}: empty (0 elements)"
            if n == 0
            else f"{name}: all {n} elements match exactly",
        )
    e_flat = expected.reshape(-1)
    a_flat = actual.reshape(-1)
    rows = max(1, _CHUNK_BYTES // max(1, expected.dtype.itemsize))
    n_mismatch = 0
    max_abs = 0.0
    max_rel = 0.0
    # The worst value so far: ((is a mismatch, abs error, -index), index, field, expected, actual).
    best: tuple[tuple[bool, float, int], int, str | None, np.generic, np.generic] | None = None
    has_float = False

    for start in range(0, n, rows):
        e_chunk = e_flat[start : start + rows]
        a_chunk = a_flat[start : start + rows]
        n_rows = e_chunk.shape[0]
        row_bad = np.zeros(n_rows, dtype=bool)
        for label, e2, a2 in _leaves(e_chunk.reshape(n_rows, 1), a_chunk.reshape(n_rows, 1), None):
            if e2.size == 0:
                continue
            has_float |= e2.dtype.kind in "fc"
            leaf = _compare_leaf(e2, a2, rtol, atol)
            row_bad |= leaf.mismatch.any(axis=1)
            max_abs = max(max_abs, float(leaf.abs_err.max()))
            max_rel = max(max_rel, float(leaf.rel_err.max()))
            bad = bool(leaf.mismatch.any())
            # argmax takes the first of equal errors: the lowest index within this leaf.
            pos = int(
                np.argmax(np.where(leaf.mismatch, leaf.abs_err, -1.0) if bad else leaf.abs_err)
            )
            r, c = divmod(pos, e2.shape[1])
            err = float(leaf.abs_err[r, c])
            key = (bad, err, -(start + r))
            if (bad or err > 0.0) and (best is None or key > best[0]):
                at_field = label if label is None or e2.shape[1] == 1 else f"{label}[{c}]"
                best = (key, start + r, at_field, e2[r, c], a2[r, c])
        n_mismatch += int(np.count_nonzero(row_bad))

    ok = n_mismatch == 0
    worst_index: int | None = None
    exp_v: Scalar = None
    act_v: Scalar = None
    field: str | None = None
    if best is not None:
        _, worst_index, field, ev, av = best
        exp_v, act_v = _py_value(ev), _py_value(av)

    if n == 0:
        message = f"{name}: empty (0 elements)"
    elif ok and max_abs == 0.0:
        message = f"{name}: all {n} elements match exactly"
    elif ok:
        message = (
            f"{name}: all {n} elements match within rtol={rtol:g}, atol={atol:g} "
            f"(largest error {_fmt_err(max_abs)})"
        )
    else:
        assert best is not None and worst_index is not None
        err = best[0][1]
        where = f"at index {worst_index}"
        if expected.ndim > 1:
            where += f" {tuple(int(i) for i in np.unravel_index(worst_index, expected.shape))}"
        if field is not None:
            where += f", field '{field}'"
        lead = f"largest error {_fmt_err(err)}" if math.isfinite(err) else "worst"
        if not has_float and math.isinf(err):
            lead = "first difference"
        message = (
            f"{name}: {n_mismatch} of {n} elements differ; {lead} {where} "
            f"(expected {_show_value(best[3])}, got {_show_value(best[4])})"
        )
    return Comparison(
        name=name,
        ok=ok,
        n_elements=n,
        n_mismatch=n_mismatch,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        worst_index=worst_index,
        expected_value=exp_v,
        actual_value=act_v,
        message=message,
        field=field,
    )


# --- totals -----------------------------------------------------------------------------------


def _total(arr: npt.NDArray[Any], op: str) -> Any:
    """The combined total of ``arr`` (1-D, numeric): integers in their own width, wrapping;
    floats in float64."""
    if arr.size == 0:
        return None
    if arr.dtype.kind in "iu":
        if op == "+":
            wide = arr.astype(np.uint64 if arr.dtype.kind == "u" else np.int64)
            with np.errstate(over="ignore"):
                total = int(wide.sum(dtype=wide.dtype))
            bits = arr.dtype.itemsize * 8
            total %= 1 << bits
            if arr.dtype.kind == "i" and total >= 1 << (bits - 1):
                total -= 1 << bits
            return total
        return int(arr.max() if op == "max" else arr.min())
    if arr.dtype.kind == "b" and op != "+":
        return bool(arr.max() if op == "max" else arr.min())
    work = arr.astype(np.float64)
    if op == "+":
        return float(work.sum())
    return float(np.max(work) if op == "max" else np.min(work))


def compare_totals(
    name: str,
    expected: npt.NDArray[Any],
    actual: npt.NDArray[Any],
    expected_count: int,
    actual_count: int,
    op: str = "+",
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> Comparison:
    """Compare the total (``op``) of ``expected[:expected_count]`` with that of
    ``actual[:actual_count]``: the partial results of two launches with different grids (see
    the module docstring). ``n_elements`` is 1 (the total); the message says the output was
    checked as a total of partials."""
    _check_tolerance(rtol, atol)
    if op not in TOTAL_OPS:
        raise UsageError(
            f"cannot compare totals with the combine op {op!r}",
            f"use one of {', '.join(TOTAL_OPS)}",
        )
    e = np.asarray(expected).reshape(-1)
    a = np.asarray(actual).reshape(-1)

    def fail(why: str) -> Comparison:
        return Comparison(name, False, 1, 1, math.inf, math.inf, None, None, None, f"{name}: {why}")

    if e.dtype != a.dtype:
        return fail(f"dtype {a.dtype} differs from the expected {e.dtype}")
    if e.dtype.kind not in "iufb":
        return fail(f"a total of {e.dtype} values cannot be formed (numbers only)")
    for what, count, arr in (("expected", expected_count, e), ("actual", actual_count, a)):
        if not 1 <= count <= arr.size:
            return fail(f"{count} partials asked of the {what} run, which holds {arr.size}")
    pe, pa = e[:expected_count], a[:actual_count]
    te, ta = _total(pe, op), _total(pa, op)
    label = "sum" if op == "+" else op
    head = (
        f"{name}: {label} of the first {expected_count} partials (gridDim.x of the original) "
        f"against the first {actual_count} (the variant's)"
    )
    if e.dtype.kind == "f":
        assert isinstance(te, float) and isinstance(ta, float)
        eps = float(np.finfo(e.dtype).eps)
        scale = float(np.abs(pe.astype(np.float64)).sum() + np.abs(pa.astype(np.float64)).sum())
        if op != "+":
            scale = abs(te)
        tol = atol + max(rtol, eps * max(expected_count, actual_count)) * scale
        same = te == ta or (math.isnan(te) and math.isnan(ta))
        err = 0.0 if same else abs(ta - te) if math.isfinite(ta - te) else math.inf
        ok = same or err <= tol
        rel = 0.0 if err == 0.0 else err / abs(te) if te else math.inf
        how = f"within {_fmt_err(tol)}" if ok else f"error {_fmt_err(err)} over {_fmt_err(tol)}"
    else:
        ok = te == ta
        err = 0.0 if ok else float(abs(int(ta) - int(te)))
        rel = 0.0 if ok else (err / abs(float(te)) if te else math.inf)
        how = "exactly" if ok else "differ"
    message = f"{head}: {te} and {ta} {'match ' + how if ok else how}"
    return Comparison(
        name=name,
        ok=ok,
        n_elements=1,
        n_mismatch=0 if ok else 1,
        max_abs_err=err,
        max_rel_err=rel,
        worst_index=None if ok else 0,
        expected_value=te,
        actual_value=ta,
        message=message,
    )


def compare_outputs(
    expected: Mapping[str, npt.NDArray[Any]],
    actual: Mapping[str, npt.NDArray[Any]],
    names: Sequence[str],
    rtol: float,
    atol: float,
    totals: Mapping[str, str] | None = None,
    grids: tuple[int, int] = (0, 0),
) -> list[Comparison]:
    """The outputs ``names`` of two runs compared: element by element (:func:`compare`), or,
    for those in ``totals`` (name -> combine op), as the totals of the first ``grids[0]``
    partials of ``expected`` against the first ``grids[1]`` of ``actual``."""
    out = []
    for n in names:
        op = (totals or {}).get(n)
        if op is None:
            out.append(compare(n, expected[n], actual[n], rtol, atol))
        else:
            out.append(
                compare_totals(n, expected[n], actual[n], grids[0], grids[1], op, rtol, atol)
            )
    return out
