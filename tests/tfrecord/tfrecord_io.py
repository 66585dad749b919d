"""TFRecord shards and tf.train.Example records written without TensorFlow, for the hostile
tests (tests/tfrecord/test_tfrecord.py): the framing (uint64 length, masked CRC-32C of it,
data, masked CRC-32C of the data) and the few protobuf wire rules an Example needs, so that a
test can write a valid shard and then break exactly one thing in it. Standard library only."""
import struct


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One framed record."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))


def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def example(features):
    """A serialized Example of {key: (kind, values)}, kind "bytes", "float" or "int64"."""
    entries = b""
    for key, (kind, values) in features.items():
        if kind == "bytes":
            lst = _field(1, b"".join(_field(1, v) for v in values))
        elif kind == "float":
            packed = struct.pack("<%df" % len(values), *values)
            lst = _field(2, _field(1, packed) if values else b"")
        else:
            packed = b"".join(_varint(v) for v in values)
            lst = _field(3, _field(1, packed) if values else b"")
        entries += _field(1, _field(1, key.encode()) + _field(2, lst))
    return _field(1, entries)
