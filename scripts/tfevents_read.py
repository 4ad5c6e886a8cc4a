#!/usr/bin/env python3
"""Reads TensorBoard event files with Python's standard library alone and prints them as JSON.

An independent reader of the format store/tfevents writes, made from its documentation (TensorFlow's
record framing and event.proto / summary.proto), not from the Go code: the tests compare what it
reads with the store's values.

    scripts/tfevents_read.py PATH...      PATH: an event file, or a folder whose event files are read

Each record is a little-endian uint64 length, the masked CRC-32C of those 8 bytes, the data, and
the masked CRC-32C of the data; both CRCs are checked (exit status 1 on a mismatch). The data is an
Event: wall_time (1, double), step (2, int64), file_version (3, string), summary (5: Summary, whose
value (1) is repeated Value: tag (1, string), simple_value (2, float), histo (5: HistogramProto,
min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6 and bucket 7 packed doubles)).

Output: {"files": [{"path": ..., "truncated": bool, "events": [{"wall_time", "step",
"file_version"?, "values": [{"tag", "simple_value"? , "histo"?}]}]}]}. A file that ends inside a
record (its writer still writing it, or killed) is read up to that record and marked truncated.
"""
import json
import os
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("varint runs past the message")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def fields(buf):
    """Yields (field number, wire type, value) of a protocol buffer message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(buf):
            raise ValueError("field %d runs past the message" % num)
        yield num, wire, v


def double(b):
    return struct.unpack("<d", b)[0]


def histo(buf):
    h = {"bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for num, wire, v in fields(buf):
        if wire == 1 and num in names:
            h[names[num]] = double(v)
        elif num in (6, 7):
            key = "bucket_limit" if num == 6 else "bucket"
            if wire == 2:
                h[key].extend(struct.unpack("<%dd" % (len(v) // 8), v))
            elif wire == 1:
                h[key].append(double(v))
    return h


def value(buf):
    out = {}
    for num, wire, v in fields(buf):
        if num == 1 and wire == 2:
            out["tag"] = v.decode("utf-8")
        elif num == 2 and wire == 5:
            out["simple_value"] = struct.unpack("<f", v)[0]
        elif num == 5 and wire == 2:
            out["histo"] = histo(v)
    return out


def event(buf):
    out = {"wall_time": 0.0, "step": 0, "values": []}
    for num, wire, v in fields(buf):
        if num == 1 and wire == 1:
            out["wall_time"] = double(v)
        elif num == 2 and wire == 0:
            out["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wire == 2:
            out["file_version"] = v.decode("utf-8")
        elif num == 5 and wire == 2:
            for snum, swire, sv in fields(v):
                if snum == 1 and swire == 2:
                    out["values"].append(value(sv))
    return out


def read_file(path):
    events, truncated = [], False
    with open(path, "rb") as f:
        data = f.read()
    i = n = 0
    while i < len(data):
        if i + 12 > len(data):
            truncated = True
            break
        head = data[i:i + 8]
        (length,) = struct.unpack("<Q", head)
        (crc,) = struct.unpack("<I", data[i + 8:i + 12])
        if crc != masked_crc(head):
            sys.exit("%s: record %d: the length's CRC %#010x is not %#010x" % (path, n, crc, masked_crc(head)))
        if i + 12 + length + 4 > len(data):
            truncated = True
            break
        body = data[i + 12:i + 12 + length]
        (crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        if crc != masked_crc(body):
            sys.exit("%s: record %d: the data's CRC %#010x is not %#010x" % (path, n, crc, masked_crc(body)))
        events.append(event(body))
        i += 16 + length
        n += 1
    return {"path": path, "truncated": truncated, "events": events}


def main(args):
    if not args:
        sys.exit(__doc__)
    paths = []
    for a in args:
        if os.path.isdir(a):
            paths.extend(sorted(os.path.join(a, n) for n in os.listdir(a) if "tfevents" in n))
        else:
            paths.append(a)
    json.dump({"files": [read_file(p) for p in paths]}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
