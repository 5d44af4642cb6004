import random

L = range(32)
FULL = 0xFFFFFFFF
pats = []  # (name, op, width, mask, offs)


def add(name, op, w, offs, mask=FULL):
    offs = [int(o) if (mask >> i) & 1 else 0 for i, o in enumerate(offs)]
    assert all(0 <= o < 40960 and o % w == 0 for o in offs), name
    pats.append((name, op, w, mask, offs))


for op in (0, 1):
    t = "ld" if op == 0 else "st"
    for s in (1, 2, 16, 32, 33):
        add(f"{t}32 stride{s}", op, 4, [4 * s * i for i in L])
    for s in (1, 2, 16, 17):
        add(f"{t}64 stride{s}", op, 8, [8 * s * i for i in L])
    for s in (1, 2, 8, 9):
        add(f"{t}128 stride{s}", op, 16, [16 * s * i for i in L])
    add(f"{t}64 uniform", op, 8, [64] * 32)
    add(f"{t}128 uniform", op, 16, [64] * 32)
    add(f"{t}32 uniform", op, 4, [64] * 32)
    add(f"{t}64 lane%16", op, 8, [8 * (i % 16) for i in L])
    add(f"{t}128 lane%8", op, 16, [16 * (i % 8) for i in L])
    add(f"{t}64 pairs^1 consecutive", op, 8, [8 * (i // 2) for i in L])
    add(f"{t}64 pairs^2 consecutive", op, 8, [8 * ((i // 4) * 2 + i % 2) for i in L])
    add(f"{t}64 pairs^4", op, 8, [8 * ((i // 8) * 4 + i % 4) for i in L])
    add(
        f"{t}64 pairs^1 one pair broken",
        op,
        8,
        [8 * (i // 2) + (8 * 20 if i == 5 else 0) for i in L],
    )
    add(f"{t}64 uniform lane1 off", op, 8, [64] * 32, FULL & ~2)
    add(f"{t}64 stride1 even lanes", op, 8, [8 * i for i in L], 0x55555555)
    add(f"{t}64 stride1 odd lanes", op, 8, [8 * i for i in L], 0xAAAAAAAA)
    add(f"{t}64 lanes 0,16 distinct", op, 8, [8 * i for i in L], 0x00010001)
    add(f"{t}64 lanes 0,16 same bank", op, 8, [256 * i for i in L], 0x00010001)
    add(f"{t}64 stride1 lanes0-15", op, 8, [8 * i for i in L], 0x0000FFFF)
    add(f"{t}64 uniform lanes0-15", op, 8, [64] * 32, 0x0000FFFF)
    add(f"{t}128 pairs^1 consecutive", op, 16, [16 * (i // 2) for i in L])
    add(f"{t}128 pairs^2 consecutive", op, 16, [16 * ((i // 4) * 2 + i % 2) for i in L])
    add(f"{t}128 quads equal", op, 16, [16 * (i // 4) for i in L])
    add(f"{t}128 octets equal", op, 16, [16 * (i // 8) for i in L])
    add(f"{t}128 pairs^4", op, 16, [16 * ((i // 8) * 4 + i % 4) for i in L])
    add(f"{t}128 uniform even lanes", op, 16, [64] * 32, 0x55555555)
    add(f"{t}128 stride1 even lanes", op, 16, [16 * i for i in L], 0x55555555)
    add(f"{t}128 stride1 lane0,8,16,24", op, 16, [16 * i for i in L], 0x01010101)
    add(f"{t}128 uniform lanes0-7", op, 16, [64] * 32, 0x000000FF)
    add(f"{t}128 halves uniform distinct", op, 16, [16 * (i // 16) for i in L])
    add(f"{t}32 stride1 16 lanes", op, 4, [4 * i for i in L], 0x0000FFFF)
    add(f"{t}32 stride32 16 lanes", op, 4, [128 * i for i in L], 0x0000FFFF)
    add(f"{t}32 stride32 odd lanes", op, 4, [128 * i for i in L], 0xAAAAAAAA)
    add(f"{t}32 lane%2 same bank", op, 4, [128 * (i % 2) for i in L])
    add(f"{t}32 half uniform half stride1", op, 4, [0 if i < 16 else 4 * i for i in L])
    add(f"{t}32 col 32x32", op, 4, [4 * 32 * i for i in L])
    add(f"{t}32 col 32x33", op, 4, [4 * 33 * i for i in L])
    for s in (1, 2, 4, 128):
        add(f"{t}8 stride{s}", op, 1, [s * i for i in L])
    add(f"{t}8 uniform", op, 1, [5] * 32)
    add(f"{t}8 lane%4 bytes of word0, others distinct", op, 1, [i % 4 + 128 * (i // 4) for i in L])
    for s in (1, 2, 64):
        add(f"{t}16 stride{s}", op, 2, [2 * s * i for i in L])
    add(f"{t}16 uniform", op, 2, [6] * 32)

for w in (4, 8):
    for name, offs, mask in [
        ("uniform", [64] * 32, FULL),
        ("stride1", [w * i for i in L], FULL),
        ("stride2", [2 * w * i for i in L], FULL),
        ("stride32w", [128 * i for i in L], FULL),
        ("lane%2", [w * (i % 2) for i in L], FULL),
        ("lane%2 same bank", [128 * (i % 2) for i in L], FULL),
        ("lane/2", [w * (i // 2) for i in L], FULL),
        ("lane/16", [w * (i // 16) for i in L], FULL),
        ("uniform 16 lanes", [64] * 32, 0xFFFF),
        ("uniform 2 lanes", [64] * 32, 0x3),
        ("uniform 4 lanes spread", [64] * 32, 0x01010101),
        ("lane%4 4 words", [w * (i % 4) for i in L], FULL),
        ("lane%8 4 same-bank", [128 * (i % 4) for i in L], FULL),
    ]:
        add(f"atom{8 * w} {name}", 2, w, offs, mask)

rng = random.Random(1234)
for op in (0, 1):
    for w in (4, 8, 16, 1, 2):
        for k in range(24 if w >= 4 else 8):
            npool = rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 24, 32])
            span = rng.choice([128, 256, 512, 1024, 4096])
            pool = [rng.randrange(0, span // w) * w for _ in range(npool)]
            struct = rng.choice(["free", "pair1", "pair2", "free", "pair1"])
            offs = []
            for i in L:
                if struct == "pair1":
                    src = i & ~1
                elif struct == "pair2":
                    src = i & ~2
                else:
                    src = i
                offs.append(None if src != i else rng.choice(pool))
            offs = [
                o if o is not None else offs[i & ~1 if struct == "pair1" else i & ~2]
                for i, o in enumerate(offs)
            ]
            mask = FULL if rng.random() < 0.7 else rng.getrandbits(32) | 1
            add(
                f"rand {'ld' if op == 0 else 'st'}{8 * w} {struct} pool{npool} span{span} #{k}",
                op,
                w,
                offs,
                mask,
            )
    # random atomics
for w in (4, 8):
    for k in range(10):
        npool = rng.choice([1, 2, 4, 8, 16, 32])
        span = rng.choice([128, 512, 4096])
        pool = [rng.randrange(0, span // w) * w for _ in range(npool)]
        offs = [rng.choice(pool) for _ in L]
        mask = FULL if rng.random() < 0.7 else rng.getrandbits(32) | 1
        add(f"rand atom{8 * w} pool{npool} span{span} #{k}", 2, w, offs, mask)

with open("patterns.txt", "w") as f, open("names.txt", "w") as g:
    for name, op, w, mask, offs in pats:
        f.write(f"{op} {w} {mask} " + " ".join(map(str, offs)) + "\n")
        g.write(name + "\n")
print(len(pats))
