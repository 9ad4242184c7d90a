# Columns line up by the cells a terminal gives text, whatever its bytes:
# session labels with wide (CJK) and combining characters.  The check
# counts cells with Python's unicodedata, not with envlog's own code.
envlog -C "$FIXTURES/envs/basic" bundle export "表 é" -o k.envb --namespace nvrtc/ >/dev/null || exit 1
envlog -C "$FIXTURES/envs/basic" bundle export "$(printf 'cafe\xcc\x81')" -o b.envb >/dev/null || exit 1
envlog -C new bundle import k.envb >/dev/null || exit 1
envlog -C new bundle import b.envb >/dev/null || exit 1
envlog -C new sessions > table
/usr/bin/python3 - table <<'PY'
import sys, unicodedata
def cells(s):
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in s)
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
head = lines[0]
col = cells(head[:head.index("HOST")])
for l in lines[1:]:
    # id and start are ASCII: the label begins at the header's LABEL
    start = head.index("LABEL")
    label = l[start:].split("  ")[0]
    rest = l[start + len(label):]
    at = cells(l[:start]) + cells(label) + len(rest) - len(rest.lstrip(" "))
    print("%s: the host column %s" % (ascii(label), "lines up" if at == col else
                                      "is at cell %d, not %d" % (at, col)))
PY
