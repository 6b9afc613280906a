#!/usr/bin/env python3
"""check_seeds.py CF_TABLE: fails (exit 1) when the committed seed corpus is
not what the generators make now, or when records_table.py reads the record
table otherwise than the compiled code numbers it.

  CF_TABLE  the cf_table program (tests/fuzz/cf_table.c): the compiled
            enum store_cf, one "NAME VALUE" a line

Each generator's SEEDS must equal its corpus directory file for file, so a
family number that moves in node/state/records.h (or one copied into a generator
again) shows here until the corpus is regenerated
(tests/fuzz/gen_peer_seeds.py, gen_seeds.py).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_peer_seeds  # noqa: E402
import gen_seeds  # noqa: E402
from records_table import by_name, families  # noqa: E402


def fields(b):
    """{field number: [values]} of one protobuf message (varints as ints,
    length-delimited fields as bytes)."""
    out, i = {}, 0

    def varint(i):
        v = shift = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v, i
    while i < len(b):
        key, i = varint(i)
        if key & 7 == 0:
            v, i = varint(i)
        elif key & 7 == 2:
            n, i = varint(i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % (key & 7))
        out.setdefault(key >> 3, []).append(v)
    return out


def main(argv):
    bad = []
    compiled = {}
    for line in subprocess.run([argv[1]], stdout=subprocess.PIPE, check=True,
                               text=True).stdout.splitlines():
        name, value = line.split()
        compiled[name] = int(value)
    read = families()
    if read != compiled:
        bad.append("records_table.py reads %s, the compiled table is %s" % (read, compiled))
    # each snap_<family> seed carries that family's number (PeerMsg
    # snap_rep = 16, SnapRep cf = 1): the seed reaches its merge path
    names = by_name()
    for seed, data in sorted(gen_peer_seeds.SEEDS.items()):
        fam = seed[len("snap_"):]
        if not seed.startswith("snap_") or fam not in names:
            continue
        cf = fields(fields(data)[16][0])[1][0]
        if cf != names[fam]:
            bad.append("peer_msg: seed %s carries cf %d, the family %s is %d" % (
                seed, cf, fam, names[fam]))
    for gen in (gen_peer_seeds, gen_seeds):
        have = set(os.listdir(gen.OUT))
        want = set(gen.SEEDS)
        for name in sorted(have ^ want):
            bad.append("%s: seed %s is %s" % (
                os.path.basename(gen.OUT), name,
                "in the corpus only" if name in have else "not in the corpus"))
        for name in sorted(have & want):
            with open(os.path.join(gen.OUT, name), "rb") as f:
                if f.read() != gen.SEEDS[name]:
                    bad.append("%s: seed %s differs from what %s makes" % (
                        os.path.basename(gen.OUT), name, gen.__name__ + ".py"))
    for b in bad:
        print("FAIL " + b)
    if bad:
        print("run tests/fuzz/gen_peer_seeds.py and gen_seeds.py, and commit the corpus")
        return 1
    print("seed corpus current: %d families, %d + %d seeds" % (
        len(read), len(gen_peer_seeds.SEEDS), len(gen_seeds.SEEDS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
