"""A ``__device__`` helper function of the kernel's file that the kernel calls, read as a
:class:`~gpuadvise.source.text.KernelSource` over the helper's body, so that a rewrite made for
the kernel's body (GA205's shuffle tail) applies where the code lies. Only a helper that this
kernel alone calls: one rewritten for this kernel's launch must not change another caller."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuadvise.source import tree as T
from gpuadvise.source.text import KernelSource

__all__ = ["Helper", "helper_at", "pointee_type"]


@dataclass(frozen=True)
class Helper:
    name: str
    source: KernelSource  # the kernel's file, its body the helper's
    params: tuple[T.KernelParam, ...]
    calls: tuple[T.Call, ...]  # the helper's calls, all in the kernel's body

    def argument(self, param: str, call: T.Call) -> tuple[int, int] | None:
        """The span of the argument ``call`` passes for parameter ``param`` (None: none)."""
        k = next((i for i, p in enumerate(self.params) if p.name == param), None)
        return call.args[k] if k is not None and k < len(call.args) else None

    def passed(self, kernel: KernelSource, param: str) -> list[tuple[str, int]]:
        """For each call, the name of the array the kernel passes for ``param`` and the file
        offset where the call ends; (why not, -1) for an argument that is no plain name."""
        out = []
        for call in self.calls:
            span = self.argument(param, call)
            e = kernel.expr(span) if span else None
            if e is None or e.stripped().kind != "name":
                why = f"the kernel passes `{self.name}` no plain array name for `{param}`"
                return [(why, -1)]
            out.append((e.stripped().text, call.span[1]))
        return out


def helper_at(ks: KernelSource, line: int, *, through_helpers: bool = False) -> Helper | str:
    """The function of ``ks``'s file whose body holds source line ``line``, when only the
    kernel's body calls it (by name, one or more times); else why not, as a sentence. With
    ``through_helpers``, its calls may also lie in other helpers that only this kernel calls,
    directly or through others (radixsort's ``scanwarp`` in ``scan4`` in ``rank4``): ``calls``
    are then every call of it, wherever they lie."""
    st = ks.tree
    a, b = st.line_start(line), st.line_start(line + 1)
    at = a + max(len(st.code[a:b].rstrip()) - 1, 0)  # the line's last character: in the body
    fn = T.function_at(st, at)
    if fn is None or T.is_kernel_definition(st, at):
        return f"line {line} is in no __device__ function of the kernel's file"
    name, whole, body, params = fn
    if ks.span[0] <= whole[0] < ks.span[1]:
        return f"line {line} is in a function defined inside the kernel"
    calls: list[T.Call] = []
    why = _called_by_kernel_alone(ks, name, whole, body, through_helpers, {name}, calls)
    if why:
        return why
    src = dataclasses.replace(
        ks, decl_line=st.line(whole[0]), body_start=body[0], body_end=body[1] - 1,
        kernel=None, bindings={},
    )  # fmt: skip
    return Helper(name, src, params, tuple(calls))


def _called_by_kernel_alone(
    ks: KernelSource,
    name: str,
    whole: tuple[int, int],
    body: tuple[int, int],
    through: bool,
    seen: set[str],
    out: list[T.Call],
) -> str | None:
    """Why function ``name`` (defined at ``whole``) is not called by the kernel of ``ks``
    alone (None: it is; its calls appended to ``out``). ``through``: a call may lie in another
    function of the file that the kernel alone calls (``seen``: the functions on the way)."""
    st = ks.tree
    calls = [c for c in T.calls(st) if c.name.split("<")[0].strip() == name]
    at_call = {c.span[0] for c in calls}
    for u in T.uses(st, name, (0, len(st.text))):
        if whole[0] <= u.span[0] < body[0]:
            continue  # the definition's own name
        where = st.line(u.span[0])
        if u.span[0] not in at_call:
            return f"`{name}` is named at line {where} other than by a call"
        if ks.span[0] <= u.span[0] < ks.span[1]:
            continue
        outside = (
            f"`{name}` is also called at line {where}, outside this kernel: a rewrite verified "
            "for this kernel's launch alone must not change another caller"
        )
        fn = T.function_at(st, u.span[0]) if through else None
        if fn is None or T.is_kernel_definition(st, u.span[0]) or fn[0] in seen:
            return outside
        caller, cwhole, cbody, _ = fn
        if _called_by_kernel_alone(ks, caller, cwhole, cbody, True, seen | {caller}, []):
            return outside + f" (`{caller}` is called by another function too)"
    if not calls:
        return f"the kernel does not call `{name}`"
    out.extend(calls)
    return None


def pointee_type(param: T.KernelParam) -> str | None:
    """The element type of a pointer or array parameter (``half2 * const v``: ``half2``)."""
    if not param.pointer:
        return None
    words = param.type.replace("*", " ").replace("[", " [ ").replace("]", " ] ").split()
    kept, depth = [], 0
    for w in words:
        depth += (w == "[") - (w == "]")
        if depth == 0 and w not in ("]", "const", "__restrict__", "restrict"):
            kept.append(w)
    return " ".join(kept) or None
