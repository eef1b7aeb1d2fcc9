#!/usr/bin/env python3
"""MNIST without a network: the four files shipped in data/mnist/ are read back with
Python's gzip and hashlib (independently of the C reader) and compared with what the
CLI reports, run from an empty directory with no data dir and no PATH (so no npm, tar
or gunzip is reachable): the compressed digests match SHA256SUMS, the decompressed ones
the table README.md quotes, and `aneforge data info` finds the shipped copy and gives
each split's sample count and first labels as the IDX bytes hold them; `train mlp
--data mnist` trains on it; `data fetch mnist` installs the four verified files, byte
for byte the decompressed ones.

usage: check_mnist_shipped.py AF_CLI SOURCE_DIR"""
import gzip, hashlib, os, re, shutil, struct, subprocess, sys, tempfile
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_util import check, finish  # noqa: E402

cli, src = os.path.abspath(sys.argv[1]), sys.argv[2]
ship = os.path.join(src, "data", "mnist")
names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]

sums = {}
for line in open(os.path.join(ship, "SHA256SUMS")):
    h, n = line.split()
    sums[n] = h
readme = open(os.path.join(ship, "README.md")).read()
check("Creative Commons" in readme, "data/mnist/README.md states the license")

plain = {}
for n in names:
    raw = open(os.path.join(ship, n + ".gz"), "rb").read()
    check(hashlib.sha256(raw).hexdigest() == sums.get(n + ".gz"), "%s.gz matches SHA256SUMS" % n)
    plain[n] = gzip.decompress(raw)
    # README.md quotes the first 8 hex digits of each decompressed digest
    check(hashlib.sha256(plain[n]).hexdigest()[:8] in readme, "%s's decompressed digest is the one README.md quotes" % n)

ref = {}
for split, (img, lab) in {"training": names[:2], "test": names[2:]}.items():
    magic, n, h, w = struct.unpack(">IIII", plain[img][:16])
    magic_l, nl = struct.unpack(">II", plain[lab][:8])
    check(magic == 0x803 and magic_l == 0x801 and (h, w) == (28, 28) and n == nl, "%s split: IDX headers" % split)
    check(len(plain[img]) == 16 + n * 784 and len(plain[lab]) == 8 + n, "%s split: sizes" % split)
    ref[split] = (n, list(plain[lab][8:18]))
check(ref["training"][0] == 60000 and ref["test"][0] == 10000, "60000 training and 10000 test samples")

tmp = tempfile.mkdtemp(prefix="af_mnist_")
env = {"HOME": tmp, "PATH": os.path.join(tmp, "no-bin")}  # no ANEFORGE_DATA, no npm
try:
    r = subprocess.run([cli, "data", "info"], cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "data info exits 0")
    check(re.search(r"mnist +ok: 4 files verified in .*\(the copy shipped with aneforge", r.stdout),
          "data info finds the shipped copy from an empty directory")
    for split, (n, first) in ref.items():
        want = "%s split: %d samples, first labels %s" % (split, n, " ".join(map(str, first)))
        check(want in r.stdout, "data info says: " + want)

    # train finds the shipped copy too: 20 steps of the MLP on 1280 digits, then the
    # whole test split (10000 digits: well above chance, 10%)
    r = subprocess.run([cli, "train", "mlp", "--data", "mnist", "--epochs", "1", "--limit", "1280", "--threads", "1"],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r"test accuracy ([0-9.]+)%", r.stdout + r.stderr)
    print(m.group(0) if m else r.stdout[-500:] + r.stderr[-500:])
    check(r.returncode == 0 and m and float(m.group(1)) > 60, "train mlp --data mnist reads the shipped copy")

    dest = os.path.join(tmp, "d")
    r = subprocess.run([cli, "data", "fetch", "mnist", "--dir", dest], cwd=tmp, env=env, capture_output=True,
                       text=True, timeout=120)
    print(r.stdout, r.stderr)
    check(r.returncode == 0 and "installed 4 verified files" in r.stdout, "data fetch mnist works offline")
    for n in names:
        p = os.path.join(dest, "mnist", n)
        check(os.path.isfile(p) and open(p, "rb").read() == plain[n], "installed %s equals the decompressed file" % n)
    left = os.listdir(os.path.join(dest, "mnist")) if os.path.isdir(os.path.join(dest, "mnist")) else []
    check(not [f for f in left if f.endswith(".part")], "no partial files left")
finally:
    shutil.rmtree(tmp)
finish("check_mnist_shipped")
