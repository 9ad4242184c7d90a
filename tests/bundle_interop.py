#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reads a bundle with tools nobody here wrote: `zstd -d` for the frames,
python3-cbor2 for the records, and this file's own reading of envlog(5)'s
framing.  Checks the manifest and every entry against `envlog bundle inspect
--json` and `envlog replay` of the environment it was exported from.

usage: bundle_interop.py ENVLOG ENV BUNDLE
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
    raw = subprocess.run(["zstd", "-dc", bundle], check=True, capture_output=True).stdout
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
    print(f"bundle interop: {len(recs)} records, {seen} entries match the environment"
          + ("" if xxhash else " (python3-xxhash missing: checksums not verified here)"))


if __name__ == "__main__":
    main()
