"""The L2 synthesis's grouping of a template's granules into unit shapes (``_residue_units``),
on a hand-made template: residues with the same toucher offsets share a shape, shapes are
numbered by their first residue, and a shape's counts are its residues' summed slot by slot."""

from __future__ import annotations

import numpy as np

from gpuadvise.model.l2.synthesis import _Layout, _residue_units


def test_residues_of_one_shape_share_it() -> None:
    lay = _Layout(ry=1, pg=100, m=1, sx=3, rows=(0, 10), cols=(0, 10))
    # (row, column) granules; residue = column % 3, cell = (row, column // 3)
    # residue 0: rows 2, 3 of column 0 -> offsets (0, 0), (1, 0) from cell (2, 0)
    # residue 1: row 0 of columns 1, 4 -> offsets (0, 0), (0, 1) from cell (0, 0)
    # residue 2: rows 5, 6 of column 2 -> offsets (0, 0), (1, 0) from cell (5, 0): residue 0's
    tr = np.array([6, 0, 3, 2, 5, 0], dtype=np.int64)
    tc = np.array([2, 4, 0, 0, 2, 1], dtype=np.int64)
    ph = np.zeros(6, dtype=np.int64)
    cnt = np.arange(24, dtype=np.float64).reshape(4, 6)
    shapes, residues, counts, of_residue = _residue_units(tr, tc, ph, cnt, lay)
    assert [s.tolist() for s in shapes] == [[[0, 0, 0], [1, 0, 0]], [[0, 0, 0], [0, 1, 0]]]
    assert residues[0].tolist() == [[0, 0, 2, 0], [0, 2, 5, 0]]
    assert residues[1].tolist() == [[0, 1, 0, 0]]
    # shape 0's slot 0: granules (2, 0) and (5, 2), inputs 3 and 4; slot 1: (3, 0) and (6, 2),
    # inputs 2 and 0. Shape 1's: (0, 1) input 5, (0, 4) input 1
    assert counts[0].tolist() == [[c[3] + c[4], c[2] + c[0]] for c in cnt.tolist()]
    assert counts[1].tolist() == [[c[5], c[1]] for c in cnt.tolist()]
    assert of_residue.tolist() == [[0, 0, 2, 0], [1, 1, 0, 0], [2, 0, 5, 0]]
