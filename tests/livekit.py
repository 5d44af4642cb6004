"""A hand-written SASS function with its life-range table, as ``nvdisasm --print-life-ranges``
prints it, and the answers derived by hand (tests/toolchain/test_liveness.py,
tests/model/test_registers.py). Import it from a test module (``from livekit import ...``).

The function (``k``), with the live general registers after each instruction worked out on
paper: a thread index makes an address (``R2:R3``, a 64-bit pair), a value is loaded into
``R4`` before a 16-trip loop and read only after it, ``R5`` accumulates ``R7`` (a constant
from the constant bank) around the loop, ``R6`` counts the trips::

     0  LDC R1, c[0x0][0x28]        R1                      1   (the stack pointer)
     1  S2R R0, SR_TID.X            R0 R1                   2
     2  LDC.64 R2, c[0x0][0x210]    R0 R1 R2 R3             4
     3  IMAD.WIDE R2, R0, 0x4, R2   R0 R1 R2 R3             4   (R0's last use)
     4  LDG.E R4, [R2.64]           R1 R2 R3 R4             4
     5  LDC R7, c[0x0][0x218]       R1 R2 R3 R4 R7          5
     6  MOV R5, RZ                  R1 R2 R3 R4 R5 R7       6
     7  MOV R6, 0x10                R1 .. R7                7   <- the peak (first of 5)
  .L_x_0:
     8  FADD R5, R5, R7             R1 .. R7                7
     9  IADD3 R6, R6, -0x1, RZ      R1 .. R7                7
    10  ISETP.NE.AND P0, PT, R6, RZ R1 .. R7                7   P0
    11  @P0 BRA .L_x_0              R1 .. R7                7   P0
    12  FADD R5, R5, R4             R1 R2 R3 R4 R5          5   (R6, R7 dead after the loop)
    13  STG.E [R2.64], R5           R1 R2 R3 R5             4
    14  EXIT                        R1                      1
  .L_x_1:
    15  BRA .L_x_1                  R1                      1   (the padding after EXIT)
"""

from __future__ import annotations

from gpuadvise.toolchain.sass import SassInstruction

# (text, GPR marks for R0..R7, PRED marks for P0): ^ written, v read, x both, : live across
ROWS = [
    ("LDC R1, c[0x0][0x28]", " ^      ", " "),
    ("S2R R0, SR_TID.X", "^:      ", " "),
    ("LDC.64 R2, c[0x0][0x210]", "::^^    ", " "),
    ("IMAD.WIDE R2, R0, 0x4, R2", "v:xx    ", " "),
    ("LDG.E R4, desc[UR4][R2.64]", " :vv^   ", " "),
    ("LDC R7, c[0x0][0x218]", " ::::  ^", " "),
    ("MOV R5, RZ", " ::::^ :", " "),
    ("MOV R6, 0x10", " :::::^:", " "),
    ("FADD R5, R5, R7", " ::::x:v", " "),
    ("IADD3 R6, R6, -0x1, RZ", " :::::x:", " "),
    ("ISETP.NE.AND P0, PT, R6, RZ, PT", " :::::v:", "^"),
    ("@P0 BRA `(.L_x_0)", " :::::::", "v"),
    ("FADD R5, R5, R4", " :::vx  ", " "),
    ("STG.E desc[UR4][R2.64], R5", " :vv v  ", " "),
    ("EXIT", " :      ", " "),
    ("BRA `(.L_x_1)", " :      ", " "),
]
LABELS = {8: ".L_x_0", 15: ".L_x_1"}  # instruction index -> the label printed before it

# live general registers per instruction, counted on paper (see the docstring)
GPR = [1, 2, 4, 4, 4, 5, 6, 7, 7, 7, 7, 7, 5, 4, 1, 1]
PRED = [0] * 10 + [1, 1] + [0] * 4

# source lines of the instructions (call sites); instruction 12 is inlined from h.cuh:2
LINES = [3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 8, 8]


def table_text(
    function: str = "k",
    gpr: list[int] | None = None,
    rows: list[tuple[str, str, str]] | None = None,
    labels: dict[int, str] | None = None,
    pred: list[int] | None = None,
) -> str:
    """A function as ``nvdisasm -plr -c`` prints it (wide mode): ``rows`` (default: ``k``'s)
    with ``gpr`` as their counts and ``labels`` before them."""
    rows = ROWS if rows is None else rows
    labels = LABELS if labels is None else labels
    counts = GPR if gpr is None else gpr
    preds = PRED if pred is None else pred
    code_w = 72
    gcols = [str(i) for i in range(len(rows[0][1]))]
    head = "|  #" + "".join(" " + c for c in gcols) + " | # 0 |"
    inner = len(head.split("|")[1])
    out = [
        f"//--------------------- .text.{function}                --------------------------",
        f'\t.section\t.text.{function},"ax",@progbits',
        " " * code_w + "// +" + "-" * (len(head) - 2) + "+",
        " " * code_w + "// |" + "GPR".center(inner) + "| PRED|",
        " " * code_w + "// " + head,
        " " * code_w + "// +" + "-" * (len(head) - 2) + "+",
        f"{function}:".ljust(code_w) + "// |" + " " * inner + "|     |",
    ]
    for i, (text, gmarks, pmarks) in enumerate(rows):
        if i in labels:
            out.append(f"{labels[i]}:".ljust(code_w) + "// |" + " " * inner + "|     |")
        code = f"        /*{i * 16:04x}*/                   {text} ;".ljust(code_w)
        g = f"{counts[i]:>3}" + "".join(" " + m for m in gmarks) + " "
        p = f" {preds[i] or '':>1}" + " " + pmarks + " "
        out.append(code + "// |" + g + "|" + p + "|")
    out.append("\t\t..........")
    return "\n".join(out) + "\n"


# A second function, ``k2``: a predicated write that does not kill (R3 keeps the thread index
# where P0 is false), and the peak inside a loop, after the accumulator's update::
#
#      0  LDC R1, c[0x0][0x28]              R1                 1
#      1  S2R R3, SR_TID.X                  R1 R3              2
#      2  ISETP.GE.AND P0, PT, R3, 0x4, PT  R1 R3              2   P0
#      3  MOV R2, RZ                        R1 R2 R3           3   P0  (R3 live: 4 may not write it)
#      4  @P0 MOV R3, 0x7                   R1 R2 R3           3   P0
#      5  MOV R0, 0x8                       R0 R1 R2 R3        4
#   .L_x_0:
#      6  FMUL R4, R3, R3                   R0 .. R4           5   <- the peak (first of 2)
#      7  FADD R2, R2, R4                   R0 .. R4           5
#      8  IADD3 R0, R0, -0x1, RZ            R0 R1 R2 R3        4
#      9  ISETP.NE.AND P0, PT, R0, RZ, PT   R0 R1 R2 R3        4   P0
#     10  @P0 BRA .L_x_0                    R0 R1 R2 R3        4   P0
#     11  STS [RZ], R2                      R1 R2              2
#     12  EXIT                              R1                 1
ROWS2 = [
    ("LDC R1, c[0x0][0x28]", " ^   ", " "),
    ("S2R R3, SR_TID.X", " : ^ ", " "),
    ("ISETP.GE.AND P0, PT, R3, 0x4, PT", " : v ", "^"),
    ("MOV R2, RZ", " :^: ", ":"),
    ("@P0 MOV R3, 0x7", " ::^ ", "v"),
    ("MOV R0, 0x8", "^::: ", " "),
    ("FMUL R4, R3, R3", ":::v^", " "),
    ("FADD R2, R2, R4", "::x:v", " "),
    ("IADD3 R0, R0, -0x1, RZ", "x::: ", " "),
    ("ISETP.NE.AND P0, PT, R0, RZ, PT", "v::: ", "^"),
    ("@P0 BRA `(.L_x_0)", ":::: ", "v"),
    ("STS [RZ], R2", " :v  ", " "),
    ("EXIT", " :   ", " "),
]
LABELS2 = {6: ".L_x_0"}
GPR2 = [1, 2, 2, 3, 3, 4, 5, 5, 4, 4, 4, 2, 1]
PRED2 = [0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0]


def table_text2(gpr: list[int] | None = None) -> str:
    """``k2`` as nvdisasm prints it."""
    return table_text("k2", GPR2 if gpr is None else gpr, ROWS2, LABELS2, PRED2)


def instructions(
    file: str = "k.cu", rows: list[tuple[str, str, str]] | None = None
) -> tuple[SassInstruction, ...]:
    """The same instructions as ``disassemble`` gives them, with source lines (``k2``'s: line
    10 + the instruction's index)."""
    out = []
    for i, (text, _g, _p) in enumerate(ROWS if rows is None else rows):
        pred = None
        body = text
        if text.startswith("@"):
            pred, body = text.split(" ", 1)
        op, _, operands = body.partition(" ")
        line, chain = (LINES[i] if rows is None else 10 + i), ()
        src = file
        if (
            i == 12 and rows is None
        ):  # inlined: the innermost location in a header, the call site in k.cu
            src, line, chain = "h.cuh", 2, ((file, LINES[i]),)
        out.append(SassInstruction(i * 16, op, op.split(".")[0], pred, operands, src, line, chain))
    return tuple(out)
