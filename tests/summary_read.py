#!/usr/bin/python3
"""Decode a TensorBoard event file with the standard library only.

Usage: summary_read.py FILE
Checks the TFRecord framing (both masked CRC-32Cs), that the first record is
the "brain.Event:2" file_version event, and prints one "tag step value" line
per scalar (value with %.9g). Exits 1 with a message on any damage.
"""
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(buf):
    """Yield (number, wire type, value) of each field of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = varint(buf, pos)
        elif wire == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        elif wire == 2:
            n, pos = varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("wire type %d" % wire)
        yield num, wire, val


def records(data):
    pos = 0
    while pos < len(data):
        head = data[pos:pos + 12]
        if len(head) < 12:
            raise ValueError("truncated record header at byte %d" % pos)
        (length,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != masked(head[:8]):
            raise ValueError("length CRC mismatch at byte %d" % pos)
        body = data[pos + 12:pos + 12 + length]
        tail = data[pos + 12 + length:pos + 16 + length]
        if len(body) != length or len(tail) != 4:
            raise ValueError("truncated record at byte %d" % pos)
        if struct.unpack("<I", tail)[0] != masked(body):
            raise ValueError("data CRC mismatch at byte %d" % pos)
        yield body
        pos += 16 + length


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        for i, rec in enumerate(records(data)):
            event = {num: val for num, _, val in fields(rec)}
            if i == 0:
                if event.get(3) != b"brain.Event:2":
                    raise ValueError("first record is not the brain.Event:2 file_version")
                continue
            step = event.get(2, 0)
            step = step - (1 << 64) if step >= 1 << 63 else step  # int64
            for num, _, value in fields(event.get(5, b"")):
                if num != 1:
                    continue
                v = {n: x for n, _, x in fields(value)}
                (simple,) = struct.unpack("<f", v[2])
                print("%s %d %.9g" % (v[1].decode(), step, simple))
    except (ValueError, KeyError, IndexError, struct.error) as e:
        sys.exit("%s: %s" % (path, e))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summary_read.py EVENT_FILE")
    main(sys.argv[1])
