import json
import math


def groups(width, offs, act, merge):
    n = 32 if width <= 4 else (16 if width == 8 else 8)
    if merge:
        n *= 2
    return [[lane for lane in range(g, min(g + n, 32)) if act[lane]] for g in range(0, 32, n)]


def pair_ok(offs, act, x):
    return all(offs[lane] == offs[lane ^ x] for lane in range(32) if act[lane] and act[lane ^ x])


def model(op, width, mask, offs, merge_vacuous=True):
    act = [(mask >> lane) & 1 for lane in range(32)]
    k = max(1, width // 4)
    merge = op == 0 and width >= 8 and (pair_ok(offs, act, 1) or pair_ok(offs, act, 2))
    wf = ideal = 0
    for g in groups(width, offs, act, merge):
        if not g:
            continue
        if op == 2:
            per = {}
            for lane in g:
                for j in range(k):
                    b = (offs[lane] // 4 + j) % 32
                    per[b] = per.get(b, 0) + 1
            wf += max(per.values())
            ideal += 1
            continue
        words = {offs[lane] // 4 + j for lane in g for j in range(k)}
        per = {}
        for w in words:
            per[w % 32] = per.get(w % 32, 0) + 1
        wf += max(per.values())
        ideal += math.ceil(len(words) / 32)
    return wf, ideal


bad = 0
for r in json.load(open("results.json")):
    op = r["op"]
    k = {0: "ld", 1: "st", 2: "atom"}[op]
    if op == 2 and r["width"] == 8:
        continue
    wf = r["wavefronts_mem_shared_op_" + k]
    conf = r["bank_conflicts_pipe_lsu_mem_shared_op_" + k]
    m, i = model(op, r["width"], r["mask"], r["offs"])
    if (m, m - i) != (wf, conf):
        bad += 1
        print(f"{r['name']:50s} hw wf={wf:.0f} conf={conf:.0f} model wf={m} conf={m - i}")
print("mismatches", bad)
