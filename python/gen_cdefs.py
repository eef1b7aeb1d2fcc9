#!/usr/bin/env python3
"""Generates python/aneforge/_cdefs.py from the public headers (include/aneforge*.h).

The Python package binds libaneforge with ctypes; every prototype, struct, enum and
constant it uses comes from this file, so the binding follows the header instead of a
hand copy. `python3 python/gen_cdefs.py` rewrites it; tests/python/test_cdefs.py fails
when the committed file is stale. Headers are globbed, so declarations may move between
aneforge.h, aneforge_llama.h and aneforge_data.h freely.
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCALARS = {
    "void": "None", "int": "c_int", "unsigned": "c_uint", "float": "c_float", "double": "c_double",
    "int64_t": "c_int64", "uint64_t": "c_uint64", "int32_t": "c_int32", "uint32_t": "c_uint32",
    "uint16_t": "c_uint16", "uint8_t": "c_uint8", "size_t": "c_size_t", "char": "c_char",
}


def headers(root=ROOT):
    return sorted(glob.glob(os.path.join(root, "include", "aneforge*.h")))


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", lambda m: " " * 0 + "\n" * m.group(0).count("\n"), text, flags=re.S)


def strip_cpp(text):
    """Drops the C++ tail (#ifdef __cplusplus ... #endif blocks with code in them)."""
    out, skip = [], 0
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#ifdef __cplusplus") or s.startswith("#if defined(__cplusplus)"):
            skip = 1
            continue
        if skip:
            if s.startswith("#if"):
                skip += 1
            elif s.startswith("#endif"):
                skip -= 1
            elif s.startswith("#else") and skip == 1:
                skip = 0
            continue
        out.append(line)
    return "\n".join(out)


def parse(paths):
    enums, structs, funcs, defines, opaque = {}, {}, {}, {}, set()
    consts = {}
    for path in paths:
        raw = open(path, encoding="utf-8").read()
        text = strip_cpp(strip_comments(raw))
        for m in re.finditer(r"^#define\s+(AF_[A-Z0-9_]+)\s+(\(?\s*\(int64_t\)\s*1\s*<<\s*\d+\s*\)?|-?\d+)\s*$", text, re.M):
            v = m.group(2).replace("(int64_t)", "")
            defines[m.group(1)] = int(eval(v))  # a number or a shift of small integers
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", text):
            opaque.add(m.group(2))
        for m in re.finditer(r"(typedef\s+)?enum\s*\{(.*?)\}\s*(\w*)\s*;", text, re.S):
            nxt = 0
            for item in [s.strip() for s in m.group(2).split(",") if s.strip()]:
                if "=" in item:
                    k, v = [s.strip() for s in item.split("=", 1)]
                    nxt = int(eval(v, {}, consts))
                else:
                    k = item
                consts[k] = nxt
                nxt += 1
            if m.group(3):
                enums[m.group(3)] = True
        for m in re.finditer(r"typedef\s+struct\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
            structs[m.group(2)] = parse_fields(m.group(1), defines)
        docs = doc_comments(strip_cpp(raw))
        for m in re.finditer(r"AF_API\s+([^;{}]*?)\b(af_\w+)\s*\(([^;{}]*?)\)\s*;", text, re.S):
            ret = " ".join(m.group(1).split())
            params = [] if m.group(3).strip() in ("", "void") else [" ".join(p.split()) for p in m.group(3).split(",")]
            funcs[m.group(2)] = (ret, params, docs.get(m.group(2), ""))
    return enums, structs, funcs, defines, consts, opaque


def doc_comments(raw):
    """The comment block above each AF_API declaration (a group's comment serves every
    declaration under it) plus a trailing comment on the line its declaration ends on."""
    out = {}
    last, prev, prev_line_end = "", None, -1
    for m in re.finditer(r"/\*(.*?)\*/|AF_API[^;]*?\b(af_\w+)\s*\(", raw, re.S):
        if m.group(1) is not None:
            body = "\n".join(l.strip().lstrip("*").strip() for l in m.group(1).split("\n")).strip()
            if body.startswith("-"):  # a section divider "---- title": the title is not a doc
                body = body.split("\n", 1)[1].strip() if "\n" in body else ""
            line_start = raw.rfind("\n", 0, m.start()) + 1
            if raw[line_start:m.start()].strip():  # code before it on its line: a trailing comment
                if prev and m.start() < prev_line_end:
                    out[prev] = (out[prev] + "\n" + body).strip()
            else:
                last = body
        else:
            prev = m.group(2)
            out[prev] = last
            semi = raw.find(";", m.end())
            nl = raw.find("\n", semi)
            prev_line_end = nl if nl >= 0 else len(raw)
    return out


def parse_fields(body, defines):
    fields = []
    for decl in [d.strip() for d in body.split(";") if d.strip()]:
        decl = " ".join(decl.split())
        fp = re.match(r"(.+?)\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", decl)
        if fp:
            fields.append((fp.group(2), "c_void_p", None))
            continue
        m = re.match(r"((?:const\s+)?(?:struct\s+)?\w+(?:\s*\*\s*(?:const\s*)?)*)\s*(.*)$", decl)
        base, names = m.group(1), m.group(2)
        for name in [n.strip() for n in names.split(",")]:
            ptr = base.count("*") + name.count("*")
            name = name.replace("*", "").strip()
            arr = None
            am = re.match(r"(\w+)\s*\[\s*(\w+)\s*\]", name)
            if am:
                name, n = am.group(1), am.group(2)
                arr = defines.get(n, None) if not n.isdigit() else int(n)
            fields.append((name, ctype(base.replace("*", "").strip(), ptr), arr))
    return fields


def ctype(base, ptr):
    base = base.replace("const", "").replace("struct", "").strip()
    if ptr:
        return "c_void_p"
    return SCALARS.get(base, base)  # af_* names resolve once every struct is known


def split_param(p):
    m = re.match(r"(.*?)(\w+)\s*(\[\s*\w*\s*\])?$", p)
    typ, name, arr = m.group(1).strip(), m.group(2), m.group(3)
    return typ + (" *" if arr else ""), name


def main(out_path=None):
    paths = headers()
    enums, structs, funcs, defines, consts, opaque = parse(paths)
    # The same text whichever header holds a declaration (include/aneforge.h may be split).
    L = ['"""Generated by python/gen_cdefs.py from include/aneforge*.h: do not edit."""']
    L.append("from ctypes import (Structure, c_char, c_double, c_float, c_int, c_int32, c_int64, c_size_t, c_uint,")
    L.append("                    c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)")
    L.append("")
    L.append("CONSTANTS = {")
    for k, v in sorted({**defines, **consts}.items()):
        L.append("    %r: %d," % (k, v))
    L.append("}")
    L.append("")
    # structs in dependency order (af_shape, af_compile_opts before users)
    done = []
    pending = dict(structs)
    while pending:
        for name, fields in sorted(pending.items()):
            deps = [f[0] for f in fields]
            types = [ctype_struct(t, structs) for _, t, _ in fields]
            if all(t not in pending or t == name for t in types):
                L.append("class %s(Structure):" % name)
                L.append("    _fields_ = [")
                for (fname, t, arr), t2 in zip(fields, types):
                    L.append("        (%r, %s%s)," % (fname, t2, " * %d" % arr if arr else ""))
                L.append("    ]")
                L.append("")
                done.append(name)
                del pending[name]
    L.append("")
    L.append("# name: (restype, [argtypes], [(c type, c name)], doc, C return type)")
    L.append("FUNCTIONS = {")
    for name in sorted(funcs):
        ret, params, doc = funcs[name]
        if "..." in params:  # variadic (af_fail): ctypes binds no fixed prototype for it
            continue
        rt = ret_ctype(ret, structs)
        args, raw = [], []
        for p in params:
            typ, pname = split_param(p)
            ptr = typ.count("*")
            base = typ.replace("*", "").replace("const", "").replace("struct", "").strip()
            args.append("c_void_p" if ptr else (base if base in structs else SCALARS.get(base, "c_int")))
            raw.append((" ".join(typ.split()), pname))
        L.append("    %r: (%s, [%s], %r, %r, %r)," % (name, rt, ", ".join(args), raw, doc, ret))
    L.append("}")
    L.append("")
    L.append("STRUCTS = %r" % done)
    L.append("")
    src = "\n".join(L)
    out_path = out_path or os.path.join(ROOT, "python", "aneforge", "_cdefs.py")
    if out_path == "-":
        sys.stdout.write(src)
    else:
        with open(out_path + ".tmp", "w", encoding="utf-8") as f:
            f.write(src)
        os.replace(out_path + ".tmp", out_path)
    return src


def ctype_struct(t, structs):
    return t if t.startswith("c_") or t in structs else "c_int"  # other af_* names are enums


def ret_ctype(ret, structs):
    ptr = ret.count("*")
    base = ret.replace("*", "").replace("const", "").replace("struct", "").strip()
    if ptr:
        return "c_void_p"
    if base in structs:
        return base
    return SCALARS.get(base, "c_int")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Regenerate python/aneforge/_cdefs.py from include/aneforge*.h.")
    ap.add_argument("out", nargs="?", help="where to write it (default: python/aneforge/_cdefs.py; -: standard output)")
    main(ap.parse_args().out)
