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
