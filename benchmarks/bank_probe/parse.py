import csv
import json

rows = list(csv.reader(line for line in open("ncu.csv") if line.startswith('"')))
hdr = rows[0]
rows = rows[1:]
names = [line.rstrip("\n") for line in open("names.txt")]
pats = [line.split() for line in open("patterns.txt")]
res = {}
for r in rows:
    i = int(r[0])
    m = (
        r[12]
        .replace("l1tex__data_pipe_lsu_", "")
        .replace("l1tex__data_", "")
        .replace(".sum", "")
        .replace("smsp__inst_executed_op_", "inst_")
    )
    res.setdefault(i, {})[m] = float(r[14].replace(",", ""))
out = []
for i, name in enumerate(names):
    op, w, mask, *offs = pats[i]
    out.append(
        {
            "name": name,
            "op": int(op),
            "width": int(w),
            "mask": int(mask),
            "offs": list(map(int, offs)),
            **res[i],
        }
    )
json.dump(out, open("results.json", "w"))
keys = sorted(res[0])
print(keys)
