"""gpuadvise.model.launch_change: the threads two launch shapes share, and when their outputs say
the change computes the same (hand-made arrays whose answer is read off)."""

from __future__ import annotations

import numpy as np

from gpuadvise.model.launch_change import (
    changed_positions,
    compare_outputs,
    covering_ctas,
    cta_box,
    threads_in,
)

POISON = np.frombuffer(b"\xff" * 40, np.float32)


def test_cta_boxes_and_the_ctas_holding_them():
    # 2-D: grid 4x3 of 16x16; CTA 5 is (x=1, y=1): threads x 16..31, y 16..31
    assert cta_box(5, (4, 3, 1), (16, 16, 1)) == ((16, 16, 0), (32, 32, 1))
    # the same threads in 32x8 blocks (grid 2x6): CTA 0 holds x 0..31, y 0..7 -> old CTAs 0, 1
    assert covering_ctas([0], ((2, 6, 1), (32, 8, 1)), ((4, 3, 1), (16, 16, 1))) == [0, 1]
    # 1-D 100 -> 128: new CTA 1 (threads 128..255) lies in old CTAs 1 and 2 (100..299)
    assert covering_ctas([1], ((1032, 1, 1), (128, 1, 1)), ((1320, 1, 1), (100, 1, 1))) == [1, 2]
    assert threads_in([1031], (1032, 1, 1), (128, 1, 1), (132000, 1, 1)) == 132000 - 1031 * 128


def _run(written: dict[int, float]) -> np.ndarray:
    out = POISON.copy()
    for k, v in written.items():
        out[k] = v
    return out


def test_the_same_values_on_the_same_threads_are_the_same():
    old = _run({k: k * 2.0 for k in range(8)})
    new = _run({k: k * 2.0 for k in range(4)})  # a subset of the threads, same values
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": new},
                              old_threads=8, new_threads=4, whole=False)  # fmt: skip
    assert ok, why


def test_a_different_value_or_an_element_the_original_never_writes_is_not():
    old = _run({k: k * 2.0 for k in range(8)})
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": _run({0: 0.0, 1: 5.0})},
                              old_threads=8, new_threads=2, whole=False)  # fmt: skip
    assert not ok and "`y`[1] differs" in why
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": _run({9: 1.0})},
                              old_threads=8, new_threads=1, whole=False)  # fmt: skip
    assert not ok and "the original threads do not" in why


def test_fewer_elements_per_thread_is_not_the_same_work():
    """A kernel hard-wired to its block writes less with a bigger one: half as many elements
    per thread (the other half of each new block finds no work)."""
    old = _run({k: 1.0 for k in range(8)})
    new = _run({k: 1.0 for k in range(4)})
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": new},
                              old_threads=8, new_threads=8, whole=False)  # fmt: skip
    assert not ok and "0.5 output elements per thread where the launch as it is writes 1" in why


def test_whole_launches_must_agree_everywhere_but_extra_threads():
    old = _run({k: 1.0 for k in range(8)})
    ok, _ = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": _run({k: 1.0 for k in range(9)})},
                            old_threads=8, new_threads=9, whole=True)  # fmt: skip
    assert ok  # the rounded-up grid's one extra thread writes its own element
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": _run({k: 1.0 for k in range(7)})},
                              old_threads=8, new_threads=8, whole=True)  # fmt: skip
    assert not ok and "leaves `y`[7] unwritten" in why
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": old}, {"y": _run({k: 1.0 for k in range(10)})},
                              old_threads=8, new_threads=8, whole=True)  # fmt: skip
    assert not ok and "writes 2 output elements the launch as it is does not" in why


def test_nothing_written_is_nothing_to_compare():
    ok, why = compare_outputs(["y"], {"y": POISON}, {"y": POISON}, {"y": POISON},
                              old_threads=8, new_threads=8, whole=True)  # fmt: skip
    assert not ok and "wrote no output element" in why


def test_the_changed_elements_alone_give_the_same_verdicts():
    """compare_launch keeps only the positions either run changed (HeCBench nw's 1 GiB
    buffers): ``changed_positions`` a chunk at a time, the messages naming the buffer's index,
    an output neither run writes (an empty selection) among others."""
    init = np.arange(10, dtype=np.int32)
    old, new = init.copy(), init.copy()
    old[[2, 7]] = -1
    new[[2, 7]] = [-1, -2]
    p = np.union1d(changed_positions(old, init, chunk=3), changed_positions(new, init, chunk=4))
    assert p.tolist() == [2, 7]
    none = np.zeros(0, dtype=np.int64)

    def compare() -> tuple[bool, str]:
        return compare_outputs(
            ["y", "z"],
            {"y": init[p], "z": init[none]},
            {"y": old[p], "z": init[none]},
            {"y": new[p], "z": init[none]},
            old_threads=2,
            new_threads=2,
            whole=True,
            index={"y": p, "z": none},
        )

    ok, why = compare()
    assert not ok and "`y`[7] differs" in why
    new[7] = -1
    ok, _ = compare()
    assert ok


def test_changed_positions_by_words_as_by_bytes() -> None:
    """Compared word by word (the scalar types one word, structs several): the same positions
    as byte by byte, NaN and signed zeros included (bytes, not values)."""
    import numpy as np

    from gpuadvise.model.launch_change import _bytes, changed_positions

    rng = np.random.default_rng(1)
    for dt in ("f4", "f8", "i1", "i2", "u8", "f4,f4,f4", "i2,i1"):
        d = np.dtype(dt)
        x = np.frombuffer(rng.integers(0, 3, 500 * d.itemsize).astype(np.uint8).tobytes(), d)
        y = np.frombuffer(rng.integers(0, 3, 500 * d.itemsize).astype(np.uint8).tobytes(), d)
        y = y.copy()
        y[::3] = x[::3]
        ref = np.flatnonzero((_bytes(x) != _bytes(y)).any(axis=1))
        assert changed_positions(x, y, chunk=64).tolist() == ref.tolist()
    a = np.array([np.nan, 1.0, -0.0], np.float32)
    assert changed_positions(a, np.array([np.nan, 1.0, 0.0], np.float32)).tolist() == [2]


def _records(rows: list[tuple[int, int, int, list[int]]]) -> np.ndarray:
    """Global records from (cta, kind, width, per-lane addresses: -1 an inactive lane)."""
    from gpuadvise.trace.access import RECORD, Space

    r = np.zeros(len(rows), RECORD)
    for i, (cta, kind, width, addrs) in enumerate(rows):
        r[i]["cta"], r[i]["kind"], r[i]["width"] = cta, kind, width
        r[i]["space"] = int(Space.GLOBAL)
        mask = 0
        for lane, a in enumerate(addrs):
            if a >= 0:
                mask |= 1 << lane
                r[i]["addr"][lane] = a
        r[i]["mask"] = mask
    return r


def _reference(r: np.ndarray) -> dict[int, int] | None:
    """cta_writes byte by byte: each written byte's CTA, None when CTAs share one."""
    from gpuadvise.trace.access import Kind

    writer: dict[int, int] = {}
    touched: dict[int, set[int]] = {}
    for rec in r:
        for lane in range(32):
            if not int(rec["mask"]) >> lane & 1:
                continue
            a, c = int(rec["addr"][lane]), int(rec["cta"])
            for b in range(a, a + int(rec["width"])):
                touched.setdefault(b, set()).add(c)
                if int(rec["kind"]) != int(Kind.LOAD):
                    if writer.setdefault(b, c) != c:
                        return None
    for b, c in writer.items():
        if touched[b] != {c}:
            return None
    return writer


def test_cta_writes_splits_a_run_only_where_no_cta_reaches_what_another_wrote():
    """Which CTA wrote each byte of a run of several, byte by byte as a reference; None (the
    run not split) where a CTA wrote or read (an atomic too) a byte another wrote, wherever
    the loads and stores lie (other buffers, misaligned, 1 to 16 bytes)."""
    from gpuadvise.model.launch_change import cta_writes
    from gpuadvise.trace.access import Kind

    base = 1 << 40
    lane = list(range(32))
    own = [(c, int(Kind.STORE), 4, [base + 4096 * c + 4 * k for k in lane]) for c in range(3)]
    reads = [(c, int(Kind.LOAD), 4, [base + (1 << 30) + 4 * k for k in lane]) for c in range(3)]
    w = cta_writes(_records(own + reads))
    assert w is not None and w.unit == 4
    starts = np.array([base, base + 4096 + 8, base + 8192 + 124, base + 12288], np.int64)
    assert w.owners(starts, 4).tolist() == [0, 1, 2, -1]
    # an element of CTA 0's last written bytes and unwritten ones is CTA 0's; one of CTA 0's
    # and CTA 1's bytes is no one CTA's
    assert w.owners(starts[:1] + 126, 4).tolist() == [0]
    next_to = (1, int(Kind.STORE), 4, [base + 128] + [-1] * 31)
    w2 = cta_writes(_records([*own, next_to]))
    assert w2 is not None and w2.owners(starts[:1] + 126, 4).tolist() == [-1]
    # CTA 1 reads a word CTA 0 wrote; CTA 2 writes one; two CTAs' atomics on one counter
    for extra in (
        (1, int(Kind.LOAD), 4, [base + 8] + [-1] * 31),
        (2, int(Kind.STORE), 1, [base + 3] + [-1] * 31),
        (1, int(Kind.ATOMIC), 4, [base + 4] + [-1] * 31),
    ):
        assert cta_writes(_records([*own, extra])) is None, extra
    counter = [(c, int(Kind.ATOMIC), 4, [base + 65536] + [-1] * 31) for c in (0, 1)]
    assert cta_writes(_records([*own, *counter])) is None
    # a CTA reading and writing its own bytes, atomics included, is no reason
    mine = (0, int(Kind.ATOMIC), 4, [base + 8] + [-1] * 31)
    assert cta_writes(_records([*own, mine, (0, int(Kind.LOAD), 16, [base] * 32)])) is not None
    rng = np.random.default_rng(7)
    for _ in range(60):
        rows = []
        for _ in range(int(rng.integers(1, 12))):
            width = int(rng.choice([1, 2, 4, 8, 16]))
            kind = int(rng.choice([0, 0, 1, 1, 2]))
            aligned = width if rng.random() < 0.7 else 1
            addrs = [
                base + int(rng.integers(0, 600)) // aligned * aligned if rng.random() < 0.6 else -1
                for _ in lane
            ]
            rows.append((int(rng.integers(0, 3)), kind, width, addrs))
        r = _records(rows)
        got, ref = cta_writes(r), _reference(r)
        assert (got is None) == (ref is None)
        if got is not None and ref is not None:
            b = np.arange(base, base + 620, dtype=np.int64)
            assert got.owners(b, 1).tolist() == [ref.get(int(x), -1) for x in b]
