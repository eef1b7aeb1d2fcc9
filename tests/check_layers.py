#!/usr/bin/env python3
"""The layers of src/, bottom to top (ARCHITECTURE.md): a file may use its own layer and
the layers below it, never one above. Checked two ways:

- calls: every undefined symbol of a library object must be defined in its own folder or
  a folder below (read from the objects with `nm`, so a call through the public header
  or a hand-written prototype is seen as well as one through an internal header);
- includes: no `#include "folder/..."` of a folder above.

Also: the library reads no environment variable and writes to no stream (messages go
through af_set_log).

usage: check_layers.py SOURCE_DIR OBJECT_DIR [--plant FOLDER=OBJECT]
OBJECT_DIR is CMake's object folder of the library (build/CMakeFiles/aneforge_obj.dir).
--plant adds an object as if it were a file of FOLDER (the self-test plants an upward
call this way and expects a failure)."""
import os
import re
import subprocess
import sys

LAYERS = "ir data text grad nn compile cpu llama hf engine mil coreml netplist ane sim model train".split()
RANK = {name: i for i, name in enumerate(LAYERS)}


def nm_all(paths):
    """{object: (defined, undefined)} global symbol names, from one nm run."""
    out = subprocess.run(["nm", "-P", "-A"] + paths, capture_output=True, text=True, check=True).stdout
    table = {p: (set(), set()) for p in paths}
    for line in out.splitlines():
        head, _, body = line.rpartition(": ")
        parts = body.split()
        if len(parts) < 2 or head not in table:
            continue
        name, kind = parts[0], parts[1]
        if sys.platform == "darwin" and name.startswith("_"):
            name = name[1:]
        if kind == "U":
            table[head][1].add(name)
        elif kind in "TDBRCVWGS":
            table[head][0].add(name)
    return table


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    src_root, obj_root = argv[1], argv[2]
    planted = []
    rest = argv[3:]
    while rest:
        if rest[0] == "--plant" and len(rest) > 1 and "=" in rest[1]:
            folder, obj = rest[1].split("=", 1)
            planted.append((folder, obj))
            rest = rest[2:]
        else:
            print(f"unknown argument {rest[0]!r}")
            return 2

    bad = []
    objects = []  # (layer, label, object path)
    sources = 0
    for layer in LAYERS:
        base = os.path.join(src_root, "src", layer)
        for dirpath, _, names in os.walk(base):
            for n in sorted(names):
                if not n.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, src_root)
                sources += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in sorted(set(re.findall(r'^#include "([a-z_]+)/', text, re.M))):
                    if inc not in RANK:
                        bad.append(f"{rel} includes from unknown layer '{inc}'")
                    elif RANK[inc] > RANK[layer]:
                        bad.append(f"{rel} ({layer}) includes from the layer above: {inc}")
                if n.endswith(".c"):
                    obj = os.path.join(obj_root, rel + ".o")
                    if os.path.exists(obj):
                        objects.append((layer, rel, obj))
    for folder, obj in planted:
        if folder not in RANK:
            print(f"--plant: unknown layer {folder!r}")
            return 2
        objects.append((folder, f"{obj} (planted in src/{folder})", obj))
    if sources < 50 or len(objects) < 50:
        print(f"only {sources} sources and {len(objects)} objects found: wrong folders? ({src_root}, {obj_root})")
        return 1

    owner = {}  # symbol -> (layer, file)
    syms = []
    table = nm_all([obj for _, _, obj in objects])
    for layer, rel, obj in objects:
        defined, undefined = table[obj]
        syms.append((layer, rel, undefined))
        for s in defined:
            owner.setdefault(s, (layer, rel))
    calls = 0
    for layer, rel, undefined in syms:
        for s in sorted(undefined):
            if s not in owner:
                continue  # libc, libm, pthreads, the compiler's helpers
            calls += 1
            dl, df = owner[s]
            if RANK[dl] > RANK[layer]:
                bad.append(f"{rel} ({layer}) calls {s}, defined in {df} ({dl}), a layer above")

    loud = []
    pat = re.compile(r"\bgetenv *\(|\b(f?printf|puts|fputs|perror|putchar) *\(|\b(stderr|stdout)\b")
    for dirpath, _, names in os.walk(os.path.join(src_root, "src")):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                path = os.path.join(dirpath, n)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for i, line in enumerate(f, 1):
                        if pat.search(line):
                            loud.append(f"{os.path.relpath(path, src_root)}:{i}: {line.strip()}")
    if loud:
        bad.append("the library reads the environment or prints:\n  " + "\n  ".join(loud))

    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"layers: {sources} files, {len(objects)} objects, {calls} calls between library files, "
          "none upward; no upward includes, no getenv, no printing")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
