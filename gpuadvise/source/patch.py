"""Source transformations shared by rules: applying a unified diff to a copy of the user's source.

gpuadvise never edits the user's files: a variant is written to a temporary directory beside
nothing the user owns, compiled and measured there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpuadvise.errors import GpuAdviseError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(GpuAdviseError):
    """A diff does not apply to the source it was made for."""


def apply_unified_diff(text: str, diff: str) -> str:
    """``text`` with the hunks of ``diff`` applied (one file; context must match exactly, at the
    stated line or, if the source moved, at the nearest place it matches).

    Lines are what ``text.split("\\n")`` gives, as in the diffs gpuadvise makes (see
    :func:`gpuadvise.source.edit.unified_diff`): a text ending with a newline has an empty last
    "line" that a hunk at the end of the file shows as context."""
    lines = text.split("\n")
    hunks: list[tuple[int, list[str], list[str]]] = []
    cur: tuple[int, list[str], list[str]] | None = None
    for raw in diff.splitlines():
        m = _HUNK.match(raw)
        if m:
            cur = (int(m.group(1)), [], [])
            hunks.append(cur)
            continue
        if cur is None or raw.startswith(("---", "+++")):
            continue
        tag, body = raw[:1], raw[1:]
        if tag == " ":
            cur[1].append(body)
            cur[2].append(body)
        elif tag == "-":
            cur[1].append(body)
        elif tag == "+":
            cur[2].append(body)
        elif raw.startswith("\\"):
            continue
        elif raw == "":
            cur[1].append("")
            cur[2].append("")
    if not hunks:
        raise PatchError("the diff has no hunks", "report this bug")
    offset = 0
    for start, old, new in hunks:
        at = _find(lines, old, start - 1 + offset)
        if at is None:
            raise PatchError(
                f"the diff does not apply at line {start}", "the source changed since the analysis"
            )
        lines[at : at + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines)


def changed_lines(diff: str) -> set[int]:
    """The lines of the old file that ``diff`` removes or replaces (1-based): the lines a fix
    rewrites (lines it only inserts rewrite nothing)."""
    out: set[int] = set()
    old_line: int | None = None
    for raw in diff.splitlines():
        m = _HUNK.match(raw)
        if m:
            old_line = int(m.group(1))
            continue
        if old_line is None or raw.startswith(("---", "+++", "\\")):
            continue
        tag = raw[:1]
        if tag == "-":
            out.add(old_line)
        if tag != "+":
            old_line += 1
    return out


def _find(lines: Sequence[str], old: Sequence[str], guess: int) -> int | None:
    stripped = [ln.rstrip("\r") for ln in lines]
    want = [ln.rstrip("\r") for ln in old]
    n = len(old)
    for delta in range(0, len(stripped) + 1):
        for at in (guess - delta, guess + delta):
            if 0 <= at <= len(stripped) - n and stripped[at : at + n] == want:
                return at
    return None


# ---------------------------------------------------------------------------------------------
# Remapping a kernel's block index (GA304: seed 002's thread-group tiling)

_BLOCK_IDX = re.compile(r"\bblockIdx\b(?:\s*\.\s*([A-Za-z_]\w*))?")


def block_index_uses(
    code: str, start: int = 0, end: int | None = None
) -> list[tuple[int, int, str]]:
    """Where comment-free ``code`` reads ``blockIdx`` between offsets ``start`` and ``end``:
    ``(start, end, member)`` per use, ``member`` being ``x``, ``y``, ``z`` (or another name after
    the dot) or ``""`` for the whole ``blockIdx``."""
    stop = len(code) if end is None else end
    return [(m.start(), m.end(), m.group(1) or "") for m in _BLOCK_IDX.finditer(code, start, stop)]


def tiled_block_index_lines(
    n: int, name: str = "ga304_block", prefix: str = "ga304_", axis: str = "x"
) -> list[str]:
    """C++ statements for the top of a kernel body that define ``const uint2 <name>``: the tile a
    block computes under seed 002's thread-group tiling with ``n`` tiles per strip.

    This is the corrected HLSL snippet of the seed (L. Bavoil, A. Ukarande; ``tiled_block_index``
    in ``kernels/tile_gather/gather.cu``), computed from ``blockIdx``/``gridDim`` at run time.
    ``axis="x"``: the grid is cut into vertical strips ``n`` blocks wide, the last one
    ``gridDim.x % n`` wide when ``n`` does not divide ``gridDim.x``, and the blocks are handed out
    strip by strip, row by row inside a strip. ``axis="y"``: horizontal strips ``n`` blocks high
    (the last one ``gridDim.y % n``), column by column inside a strip. It is
    :func:`gpuadvise.model.l2.tiled_order` in CUDA, for 2D grids (z untouched). Helper variables
    are named ``<prefix>n``, ``<prefix>flat``, ...
    """
    if n < 1:
        raise ValueError("the tile size must be at least 1")
    p = prefix
    if axis == "x":
        return [
            f"// GA304 (gpuadvise): thread-group tiling along X, N = {n}, NVIDIA's corrected",
            f"// snippet: blocks are launched in vertical strips of {n} tiles (the last strip narrower",
            f"// when {n} does not divide gridDim.x), row by row inside a strip; {name} is this",
            "// block's tile.",
            f"const unsigned {p}n = {n}u;",
            f"const unsigned {p}per_strip = {p}n * gridDim.y;  // blocks in a full strip",
            f"const unsigned {p}full_strips = gridDim.x / {p}n;",
            f"const unsigned {p}flat = gridDim.x * blockIdx.y + blockIdx.x;  // the launch order",
            f"const unsigned {p}strip = {p}flat / {p}per_strip;",
            f"const unsigned {p}local = {p}flat % {p}per_strip;",
            f"const unsigned {p}strip_w =",
            f"    {p}flat >= {p}full_strips * {p}per_strip ? gridDim.x % {p}n : {p}n;",
            f"const unsigned {p}swizzled = {p}strip * {p}n +",
            f"    ({p}local / {p}strip_w) * gridDim.x + {p}local % {p}strip_w;",
            f"const uint2 {name} = make_uint2({p}swizzled % gridDim.x, {p}swizzled / gridDim.x);",
        ]
    if axis == "y":
        return [
            f"// GA304 (gpuadvise): thread-group tiling along Y, N = {n}, NVIDIA's corrected",
            f"// snippet transposed: blocks are launched in horizontal strips of {n} tiles (the last",
            f"// strip lower when {n} does not divide gridDim.y), column by column inside a strip;",
            f"// {name} is this block's tile.",
            f"const unsigned {p}n = {n}u;",
            f"const unsigned {p}per_strip = {p}n * gridDim.x;  // blocks in a full strip",
            f"const unsigned {p}full_strips = gridDim.y / {p}n;",
            f"const unsigned {p}flat = gridDim.x * blockIdx.y + blockIdx.x;  // the launch order",
            f"const unsigned {p}strip = {p}flat / {p}per_strip;",
            f"const unsigned {p}local = {p}flat % {p}per_strip;",
            f"const unsigned {p}strip_h =",
            f"    {p}flat >= {p}full_strips * {p}per_strip ? gridDim.y % {p}n : {p}n;",
            f"const uint2 {name} =",
            f"    make_uint2({p}local / {p}strip_h, {p}strip * {p}n + {p}local % {p}strip_h);",
        ]
    raise ValueError("axis must be 'x' or 'y'")


def tiled_block_index_cuda(
    n: int, axis: str = "x", name: str = "gpuadvise_tiled_block_index"
) -> str:
    """CUDA C source of a device function ``uint2 <name>()`` returning the remapped block index:
    :func:`tiled_block_index_lines` in a function of its own, for a user to call wherever the
    kernel reads ``blockIdx.x`` / ``blockIdx.y``."""
    body = tiled_block_index_lines(n, "tile", "", axis)
    return (
        f"__device__ __forceinline__ uint2 {name}()\n{{\n"
        + "".join(f"    {ln}\n" for ln in body)
        + "    return tile;\n}\n"
    )


def remap_block_index(
    text: str, body_start: int, body_end: int, declaration: Sequence[str], name: str
) -> str:
    """``text`` with one kernel's block index remapped.

    ``body_start``/``body_end``: the offsets of the ``{`` and ``}`` of the kernel's body.
    ``declaration``: statements (unindented lines) that define ``name``, a ``uint2``/``uint3``
    holding the block index the kernel should use instead of ``blockIdx`` (they may read
    ``blockIdx`` and ``gridDim``); they are inserted at the top of the body, indented like it,
    and every ``blockIdx.x`` / ``blockIdx.y`` of the body's code (not of its comments) becomes
    ``name.x`` / ``name.y``. Raises :class:`PatchError` when the body reads ``blockIdx``
    otherwise (``blockIdx.z``, the whole ``blockIdx``), when it reads no ``blockIdx`` at all, or
    when a name the declaration assigns (``name`` and its helpers) is already used in the file.
    """
    from gpuadvise.source.text import blank_comments_and_strings

    code = blank_comments_and_strings(text)
    if not (0 <= body_start < body_end < len(text)) or code[body_start] != "{":
        raise PatchError("the kernel body's offsets do not point at its braces", "report this bug")
    if code[body_end] != "}":
        raise PatchError("the kernel body's offsets do not point at its braces", "report this bug")
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise PatchError(f"{name!r} is not an identifier", "report this bug")
    decl_code = blank_comments_and_strings("\n".join(declaration))
    assigned = {name, *re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)", decl_code)}
    for ident in sorted(assigned):
        if re.search(rf"\b{re.escape(ident)}\b", code):
            raise PatchError(
                f"the source already uses the name {ident}", "rename it, or remap blockIdx by hand"
            )
    uses = block_index_uses(code, body_start, body_end)
    if not uses:
        raise PatchError("the kernel does not read blockIdx", "nothing to remap")
    other = [u for u in uses if u[2] not in ("x", "y")]
    if other:
        what = f"blockIdx.{other[0][2]}" if other[0][2] else "blockIdx as a whole"
        raise PatchError(
            f"the kernel reads {what} (line {text.count(chr(10), 0, other[0][0]) + 1})",
            "only blockIdx.x and blockIdx.y can be remapped",
        )
    edits = [(s, e, f"{name}.{axis}") for s, e, axis in uses]
    # the insertion, indented like the body's first line of code after the brace
    line_end = code.find("\n", body_start)
    line_end = len(code) if line_end < 0 else line_end
    decl_line = code.rfind("\n", 0, body_start) + 1
    outer = re.match(r"[ \t]*", text[decl_line:])
    indent = (outer.group(0) if outer else "") + "    "
    rest = code[body_start + 1 : line_end]
    if rest.strip():
        # code follows the brace on its line: it moves to a line of its own below the insertion
        ws = len(rest) - len(rest.lstrip())
        block = "\n".join(indent + ln if ln else ln for ln in declaration)
        edits.append((body_start + 1, body_start + 1 + ws, "\n" + block + "\n" + indent))
    else:
        nxt = re.search(r"\n([ \t]*)(\S)", code[line_end : body_end + 1])
        if nxt is not None and nxt.group(2) != "}":
            indent = nxt.group(1)
        block = "\n".join(indent + ln if ln else ln for ln in declaration)
        at = min(line_end + 1, len(text))
        edits.append((at, at, block + "\n"))
    out = text
    for s, e, new in sorted(edits, key=lambda t: t[0], reverse=True):
        out = out[:s] + new + out[e:]
    return out
