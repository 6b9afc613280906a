"""records_table.py: the store's column-family numbers, read from the record
table (node/state/records.h, GD_RECORD_KINDS: one X(CF, ...) row per family, in
the order of enum store_cf, from 0), for the seed generators.  Never copy
the numbers into a generator: tests/fuzz/check_seeds.py fails when a
generator's seeds differ from what it makes now, or this reading from the
compiled table."""
import os
import re

RECORDS_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                         "node", "state", "records.h")


def rows(path=RECORDS_H):
    """[("META", "default"), ("USERS", "users"), ...]: each row's CF
    (without CF_) and its column family's name, in enum order."""
    text = open(path, encoding="utf-8").read()
    start = text.index("#define GD_RECORD_KINDS(X)")
    end = text.index("/* clang-format on */", start)
    out = re.findall(r'^\s*X\((\w+),\s*"([a-z_]+)"', text[start:end], re.M)
    if not out or len(out) != len(set(out)):
        raise ValueError("records.h: cannot read GD_RECORD_KINDS")
    return out


def families(path=RECORDS_H):
    """{"USERS": 1, ...}: each row's CF (without CF_) and its number."""
    return {cf: i for i, (cf, _) in enumerate(rows(path))}


def by_name(path=RECORDS_H):
    """{"users": 1, ...}: each column family's name and its number."""
    return {name: i for i, (_, name) in enumerate(rows(path))}
