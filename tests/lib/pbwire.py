"""Protobuf wire encoding by hand, for test tools that build grantd.v1
messages (proto/grantd.proto) where no Python protobuf package is
installed: varints, and length-delimited and varint fields."""


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b
