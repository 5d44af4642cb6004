import json

import ref
from ref import model


def pair_strict(offs, act, x):
    return all(act[lane ^ x] and offs[lane] == offs[lane ^ x] for lane in range(32) if act[lane])


R = [r for r in json.load(open("results.json")) if not (r["op"] == 2 and r["width"] == 8)]


def count(label):
    bad = 0
    for r in R:
        op = r["op"]
        k = {0: "ld", 1: "st", 2: "atom"}[op]
        wf = r["wavefronts_mem_shared_op_" + k]
        conf = r["bank_conflicts_pipe_lsu_mem_shared_op_" + k]
        m, i = model(op, r["width"], r["mask"], r["offs"])
        bad += (m != wf) + (m - i != conf) * 100
    print(label, bad)


count("base")
orig = ref.pair_ok
ref.pair_ok = pair_strict
count("strict pairs")
ref.pair_ok = orig
om = ref.model


def model_st(op, *a):
    return om(0 if op == 1 else op, *a)


ref_model = ref.model
count("base again")
