#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Holds JSON lines to the schemas of schemas/ (envlog(1), JSON OUTPUT).

usage: validate.py SCHEMAS [--goldens] FILE...

Every line of every FILE that starts with '{' must be one JSON object with
a "type" that names a schema (SCHEMAS/TYPE.schema.json) and a
"schema_version" of 1, and must be valid under that schema.  --goldens reads
the expected outputs of the golden tests, whose commands put placeholders
where a value differs from run to run ("NEW" for a new session's id).
"""
import glob
import json
import os
import sys

import jsonschema

PLACEHOLDERS = {'"NEW"': '"' + "0" * 32 + '"'}


def load(schemas):
    store, by_type = {}, {}
    for path in sorted(glob.glob(os.path.join(schemas, "*.schema.json"))):
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        jsonschema.Draft202012Validator.check_schema(s)
        store[s["$id"]] = s
        by_type[os.path.basename(path)[: -len(".schema.json")]] = s
    return store, by_type


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    store, by_type = load(argv[0])
    goldens = argv[1] == "--goldens"
    files = argv[2:] if goldens else argv[1:]
    validators = {}
    n = bad = 0
    seen = set()
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for i, text in enumerate(lines, 1):
            # A golden file may also hold other JSON-looking text (CBOR
            # diagnostic notation): a JSON line begins with a name.
            if not text.startswith('{"' if goldens else "{"):
                continue
            if goldens:
                for k, v in PLACEHOLDERS.items():
                    text = text.replace(k, v)
            where = "%s:%d" % (path, i)
            n += 1
            try:
                obj = json.loads(text)
            except ValueError as e:
                print("json: %s: not JSON: %s" % (where, e))
                bad += 1
                continue
            t = obj.get("type") if isinstance(obj, dict) else None
            if t not in by_type or t in ("common", "record-body"):
                print("json: %s: no schema for type %r" % (where, t))
                bad += 1
                continue
            seen.add(t)
            if t not in validators:
                s = by_type[t]
                validators[t] = jsonschema.Draft202012Validator(
                    s, resolver=jsonschema.RefResolver(s["$id"], s, store=store))
            errs = sorted(validators[t].iter_errors(obj), key=lambda e: list(e.path))
            for e in errs[:3]:
                print("json: %s: %s at /%s: %s" % (where, t, "/".join(map(str, e.path)),
                                                  e.message[:300]))
            bad += bool(errs)
    print("json: %d lines of %d types checked against %d schemas, %d invalid"
          % (n, len(seen), len(by_type), bad))
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
