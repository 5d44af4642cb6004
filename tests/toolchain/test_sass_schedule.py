"""benchmarks/sass_schedule.py: ptxas's control bits and one warp's in-order schedule, on five
instructions of HeCBench ga's GA309 variant (sm_90, CUDA 13.0; the words as cuobjdump prints them)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from sass_schedule import Control, control, parse, schedule  # noqa: E402

GA_SLOT = """
        /*1050*/               @P5 LDG.E.U8.CONSTANT R25, desc[UR6][R4.64] ;          /* 0x0000000604195981 */
                                                                                      /* 0x000ea2000c1e9100 */
        /*1060*/                   IMAD.MOV.U32 R23, RZ, RZ, RZ ;                     /* 0x000000ffff177224 */
                                                                                      /* 0x000fe200078e00ff */
        /*1070*/               @P5 ISETP.NE.AND P6, PT, R10, R25, PT ;                /* 0x000000190a00520c */
                                                                                      /* 0x024fc80003fc5270 */
        /*1080*/               @P5 SEL R23, RZ, 0x1, !P6 ;                            /* 0x00000001ff175807 */
                                                                                      /* 0x000fe40007000000 */
        /*1090*/                   ISETP.GE.AND P6, PT, R42, 0x2, PT ;                /* 0x000000022a00780c */
                                                                                      /* 0x000fda0003fc6270 */
"""


def test_control_bits_of_a_load_and_of_its_reader() -> None:
    # the load releases scoreboard 2 when its byte arrives, the next issues a cycle later
    assert control(0x000EA2000C1E9100) == Control(stall=1, yield_=1, write=2, read=7, wait=0)
    # the compare that reads R25 waits for scoreboards 2 and 5 first, then 4 cycles
    assert control(0x024FC80003FC5270) == Control(stall=4, yield_=0, write=7, read=7, wait=0b100100)
    # a guard's compare: 13 cycles before the load it guards may issue
    assert control(0x000FDA0003FC6270).stall == 13


def test_one_warp_waits_for_its_load_then_for_the_stall_counts() -> None:
    instrs = parse(GA_SLOT)
    assert [i.offset for i in instrs] == [0x1050, 0x1060, 0x1070, 0x1080, 0x1090]
    # load at 0, ready at 33; IMAD at 1; ISETP.NE waits to 33, +4; SEL +2; ISETP.GE +13
    assert schedule(instrs, load_cycles=33.0, passes=1) == 52.0
    # a second pass the same (its load is issued after the first pass's compare read R25)
    assert schedule(instrs, load_cycles=33.0, passes=2) == 52.0
    assert schedule(instrs, load_cycles=20.0, passes=1) == 39.0
