#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reads a bundle with tools nobody here wrote: `zstd -d` for the frames,
python3-cbor2 for the records, and this file's own reading of envlog(5)'s
framing and, for a bundle format 2, of its column image (BUNDLES, "The
column image"), written from the manual alone.  Checks the manifest and
every entry against `envlog bundle inspect --json` and `envlog replay` of
the environment it was exported from.

usage: bundle_interop.py ENVLOG ENV BUNDLE [FORMAT]
"""
import json
import struct
import subprocess
import sys

import cbor2

try:
    import xxhash
except ImportError:  # checksums are then left to envlog itself
    xxhash = None

BLOCK = 32768
KIND_HEADER, KIND_SEAL, KIND_MANIFEST, KIND_ENTRY, KIND_INDEX = 1, 2, 32, 33, 35
MARK = bytes.fromhex("5e2a4d1810000000") + b"envlog-bundle\0" + bytes([2, 0])
REPEAT = 0xFC


def frame(records, seed):
    """The snapshot file: the records in envlog's block framing (BLOCK
    FRAMING), each fragment's checksum seeded with `seed`."""
    out = bytearray()
    for rec in records:
        first = True
        while first or rec:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += bytes(left)
                continue
            take = min(len(rec), left - 7)
            last = take == len(rec)
            ftype = (1 if last else 2) if first else (4 if last else 3)
            body = struct.pack("<HB", take, ftype) + rec[:take]
            out += struct.pack("<I", xxhash.xxh3_64_intdigest(body, seed) & 0xFFFFFFFF) + body
            rec = rec[take:]
            first = False
    return bytes(out)


class Columns:
    """The contexts and columns of a column image, as envlog(5) defines
    them, and the records read from them."""

    def __init__(self, cols, depth):
        self.cols, self.pos, self.depth = cols, [0] * len(cols), depth
        self.ctx = []       # per context: [bytes column, numbers column, depth, last value, last]
        self.children = {}  # (context, step) -> context
        self.made = 0
        self.new_context(0)

    def new_column(self):
        assert self.made < len(self.cols), "more columns than the image lists"
        self.made += 1
        return self.made - 1

    def new_context(self, depth):
        self.ctx.append([self.new_column(), None, depth, 0, None])
        return len(self.ctx) - 1

    def child(self, c, step):
        if self.ctx[c][2] >= self.depth:
            return c
        if (c, step) not in self.children:
            if len(self.ctx) == 4096:
                return c
            self.children[(c, step)] = self.new_context(self.ctx[c][2] + 1)
        return self.children[(c, step)]

    def take(self, col, n):
        at = self.pos[col]
        assert at + n <= len(self.cols[col]), f"column {col} ends early"
        self.pos[col] = at + n
        return self.cols[col][at:at + n]

    def number(self, c):
        if self.ctx[c][1] is None:
            self.ctx[c][1] = self.new_column()
        z, shift = 0, 0
        while True:
            b = self.take(self.ctx[c][1], 1)[0]
            z |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        assert z < 1 << 64
        d = (z >> 1) ^ -(z & 1)
        return d

    def item(self, c):
        """One item read in context c: its bytes, and its (major type,
        argument) for what follows it."""
        col = self.ctx[c][0]
        ib = self.take(col, 1)[0]
        mt, ai = ib >> 5, ib & 31
        if mt == 0 and 24 <= ai <= 27:
            width = 1 << (ai - 24)
            v = (self.ctx[c][3] + self.number(c)) % (1 << 64)
            self.ctx[c][3] = v
            assert v < 1 << (8 * width), "a number wider than its head"
            return bytes([ib]) + v.to_bytes(width, "big"), 0, v
        if ib == REPEAT:
            last = self.ctx[c][4]
            assert last is not None, "REPEAT with nothing before it"
            return last, last[0] >> 5, None  # (a string or a float: nothing follows)
        arg, extra = ai, b""
        if 24 <= ai <= 27:
            extra = self.take(col, 1 << (ai - 24))
            arg = int.from_bytes(extra, "big")
        assert ai < 28, "malformed head"
        data = bytes([ib]) + extra
        if mt in (2, 3):
            data += self.take(col, arg)
        if mt in (2, 3) or ib in (0xF9, 0xFA, 0xFB):
            self.ctx[c][4] = data
        return data, mt, arg

    def read(self, c=0):
        """A whole item read from context c (its own, then what it holds,
        depth first): its bytes, its major type and its argument."""
        data, mt, arg = self.item(c)
        out = [data]
        if mt == 4:
            for i in range(arg):
                out.append(self.read(self.child(c, ("elem", min(i, 16))))[0])
        elif mt == 5:
            t = 0
            for i in range(arg):
                kb, kmt, karg = self.read(self.child(c, ("key", t)))
                k = karg if kmt == 0 and karg < 1 << 24 else "*"
                vb, vmt, varg = self.read(self.child(c, ("val", t, k)))
                out += [kb, vb]
                if i == 0:
                    t = varg + 1 if k == 0 and vmt == 0 and varg < 1 << 16 else 0
        elif mt == 6:
            out.append(self.read(self.child(c, "tagged"))[0])
        return b"".join(out), mt, arg


def unpack_format2(raw):
    """The snapshot file a column image gives, checked against its hash."""
    assert raw[:8] == b"envlogc2", "no column image"
    size, = struct.unpack_from("<Q", raw, 8)
    want, ident = raw[16:32], raw[32:48]
    records, depth, ncols = struct.unpack_from("<QII", raw, 48)
    lens = struct.unpack_from("<%dQ" % ncols, raw, 64)
    at, cols = 64 + 8 * ncols, []
    for n in lens:
        cols.append(raw[at:at + n])
        at += n
    assert at == len(raw), "the columns do not end the image"
    cs = Columns(cols, depth)
    recs = [cs.read()[0] for _ in range(records)]
    assert cs.pos == [len(c) for c in cs.cols], "bytes left in the columns"
    snap = frame(recs, xxhash.xxh3_64_intdigest(ident + struct.pack("<I", 0)))
    assert len(snap) == size, (len(snap), size)
    assert xxhash.xxh3_128_digest(snap) == want, "the snapshot does not match its hash"
    return snap


def records(data):
    """Reassembles the records of a file in envlog's block framing."""
    pos, parts, out = 0, [], []
    seed = None
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        csum, length, ftype = struct.unpack_from("<IHB", data, pos)
        if ftype == 0 and length == 0 and csum == 0:
            break
        payload = data[pos + 7:pos + 7 + length]
        if seed is None:  # the HEADER names the id that seeds every checksum
            hdr = cbor2.loads(payload)
            seed = xxhash.xxh3_64_intdigest(hdr[6] + struct.pack("<I", 0)) if xxhash else None
        if xxhash and seed is not None:
            want = xxhash.xxh3_64_intdigest(data[pos + 4:pos + 7 + length], seed) & 0xffffffff
            assert want == csum, f"checksum mismatch at offset {pos}"
        parts.append(payload)
        if ftype in (1, 4):  # FULL or LAST ends a record
            out.append(b"".join(parts))
            parts = []
        pos += 7 + length
    return [cbor2.loads(r) for r in out]


def main():
    envlog, env, bundle = sys.argv[1:4]
    want_format = int(sys.argv[4]) if len(sys.argv) > 4 else None
    with open(bundle, "rb") as f:
        head = f.read(len(MARK))
    fmt = 2 if head == MARK else 1
    assert fmt == 1 or xxhash, "python3-xxhash is needed for a bundle format 2"
    assert want_format in (None, fmt), (want_format, fmt)
    raw = subprocess.run(["zstd", "-dc", bundle], check=True, capture_output=True).stdout
    if fmt == 2:
        raw = unpack_format2(raw)
    recs = records(raw)
    assert recs[0][0] == KIND_HEADER and recs[0][4] == "envlog-log", recs[0]
    assert recs[0][10] == "bundle"
    manifest = recs[1]
    assert manifest[0] == KIND_MANIFEST
    assert recs[2][0] == KIND_INDEX
    assert recs[-1][0] == KIND_SEAL and recs[-1][4] == len(recs) - 2
    inspect = json.loads(subprocess.run([envlog, "bundle", "inspect", "--json", bundle],
                                        check=True, capture_output=True, text=True).stdout)
    assert manifest[5] == inspect["name"], (manifest[5], inspect["name"])
    assert inspect.get("format", 1) == fmt, (inspect.get("format"), fmt)
    assert manifest[4] == inspect["schema"] == 1
    assert manifest[11] == inspect["tunes"] and manifest[12] == inspect["kernels"]
    assert manifest[15].hex() == inspect["content_hash"]
    entries = [r for r in recs if r[0] == KIND_ENTRY]
    assert len(entries) == manifest[11] + manifest[12] + manifest[13]
    # Each entry against the state of the environment it came from.
    dump = subprocess.run([envlog, "-C", env, "replay"], check=True, capture_output=True,
                          text=True).stdout
    state = {}
    for line in dump.splitlines():
        d = json.loads(line)
        if d["table"] == "tune":
            state[("tune", d["namespace"], d["key"], int(d["checksum"], 16))] = d["winner"]
        elif d["table"] == "kernel":
            state[("kernel", d["namespace"], d["kernel_key"])] = d["binary_hash"]
    seen = 0
    for e in entries:
        rec = e[8]  # the record that set the entry, as it was recorded
        if e[4] == 0:
            key = ("tune", rec[4], rec[5], rec[6])
            assert state[key] == rec[7][rec[11]], (key, state[key])
        elif e[4] == 1:
            key = ("kernel", rec[4], rec[6].hex())
            assert state[key] == rec[13].hex()
            assert len(rec[15]) == rec[14]
        else:
            continue
        seen += 1
    assert seen == len(state), (seen, len(state))
    print(f"bundle interop: format {fmt}, {len(recs)} records, {seen} entries match the "
          "environment"
          + ("" if xxhash else " (python3-xxhash missing: checksums not verified here)"))


if __name__ == "__main__":
    main()
