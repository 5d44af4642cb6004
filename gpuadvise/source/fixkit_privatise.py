"""The fix kit's privatised histogram (GA208): a kernel's global integer-add atomics into one
buffer of bins made atomics into a copy of the bins per CTA in dynamic shared memory, flushed
into the buffer once per non-zero bin and CTA.

:func:`privatise` wraps the kernel's body, as written, in a lambda called at once whose
init-capture gives the buffer's parameter name the CTA's copy (``[&, hist = gpuadvise_bins]``):
every use of the name in the body (an atomic on the line, in a macro, through a helper function
or an object it is handed to) then reaches shared memory, and a ``return`` of the body leaves
the lambda, not the kernel, so every thread reaches the barriers around it. Before the lambda
the CTA zeroes the copy and waits; after it, it waits and adds each non-zero bin to the buffer
with one global atomic. The copy lies at the end of the launch's dynamic shared memory: its
bin count is a kernel parameter (the kernel's own dynamic shared memory, if any, before it) or,
where the kernel declares no dynamic shared memory of its own, the launch's dynamic shared
memory over the bin's size (``%dynamic_smem_size``). The launch must add the bins' bytes.

Right only where the buffer's every use in the kernel is an integer add whose result is unused
(the caller checks it on the trace); integer sums are exact in any order. Pure text work on
parsed trees: no I/O.
"""

from __future__ import annotations

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

__all__ = ["PRIVATE_NAME", "own_dynamic_shared", "privatise"]

PRIVATE_NAME = "gpuadvise_bins"
"""The CTA's copy of the bins (and the prefix of the other names the rewrite declares)."""

_TID = "threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)"
_THREADS = "blockDim.x * blockDim.y * blockDim.z"


def own_dynamic_shared(st: T.SourceTree) -> bool:
    """Whether the file declares an ``extern __shared__`` array (dynamic shared memory)."""
    return any(d.has("extern") and d.has("__shared__") for d in T.declarations(st))


def _prologue(buffer: str, count: str | None) -> list[str]:
    p = PRIVATE_NAME
    n = count if count is not None else f"{p}_dyn / sizeof(*{buffer})"
    bytes_ = f"{count} x sizeof(*{buffer}) bytes" if count else f"the bytes of `{buffer}`"
    return [
        f"// gpuadvise (GA208): a copy of `{buffer}`'s bins per CTA at the end of the",
        f"// dynamic shared memory (every launch adds {bytes_});",
        "// the body adds to it, then one global atomic per non-zero bin and CTA",
        f"extern __shared__ __align__(16) unsigned char {p}_smem[];",
        f"unsigned {p}_dyn;",
        f'asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"({p}_dyn));',
        f"const unsigned {p}_n = static_cast<unsigned>({n});",
        f"auto* const {p} = reinterpret_cast<decltype(&*{buffer})>(",
        f"    {p}_smem + ({p}_dyn - {p}_n * sizeof(*{buffer})));",
        f"const unsigned {p}_tid = {_TID};",
        f"const unsigned {p}_threads = {_THREADS};",
        f"for (unsigned b = {p}_tid; b < {p}_n; b += {p}_threads) {p}[b] = 0;",
        "__syncthreads();",
        f"[&, {buffer} = {p}]() {{",
    ]


def _epilogue(buffer: str) -> list[str]:
    p = PRIVATE_NAME
    return [
        "}();",
        "__syncthreads();",
        f"for (unsigned b = {p}_tid; b < {p}_n; b += {p}_threads)",
        f"    if ({p}[b] != 0) atomicAdd(&{buffer}[b], {p}[b]);",
    ]


def privatise(
    st: T.SourceTree, rw: Rewrite, kernel: T.Kernel, buffer: str, count: str | None
) -> str | None:
    """Rewrite ``kernel`` so that its uses of the pointer parameter ``buffer`` reach a copy of
    the bins per CTA (see the module docstring); ``count``: the expression of the bin count
    (a parameter's name), None for the launch's dynamic shared memory. Returns why not (a
    sentence; no edit made then), None when done."""
    if kernel.body is None:
        return "the kernel has no body here"
    if not any(p.name == buffer and p.pointer for p in kernel.params):
        return f"`{buffer}` is not a pointer parameter of the kernel"
    if count is None and own_dynamic_shared(st):
        return (
            "the file declares dynamic shared memory of its own and no kernel parameter gives "
            "the bin count"
        )
    start, end = kernel.body
    inner = (start + 1, end)
    if any(name.startswith(PRIVATE_NAME) for name, _ in T.identifiers(st, inner)):
        return f"the kernel already uses the name `{PRIVATE_NAME}`"
    if any(d.name == buffer for decl in T.declarations(st, inner) for d in decl.declarators):
        return f"the body declares a `{buffer}` of its own"
    line0 = st.text.rfind("\n", 0, start) + 1
    base = st.text[line0:start]
    base = base[: len(base) - len(base.lstrip())]
    pad = base + "    "
    head = "".join(f"\n{pad}{ln}" for ln in _prologue(buffer, count))
    tail = "".join(f"{pad}{ln}\n" for ln in _epilogue(buffer))
    rw.insert(start + 1, head)
    # the closing brace's line: the epilogue before it, on lines of its own
    close0 = st.text.rfind("\n", 0, end) + 1
    if st.text[close0:end].strip():
        rw.insert(end, "\n" + tail + base)
    else:
        rw.insert(close0, tail)
    return None
