"""A small synthetic MNIST in IDX files (the layout af_dataset_load reads), so the Python
and CLI runs can be compared without downloading MNIST."""
import os
import struct

import numpy as np


def digits(n, seed):
    """n 28x28 images: class c is a bright bar at row 2c+4 with noise; labels uniform."""
    r = np.random.default_rng(seed)
    labels = r.integers(0, 10, n).astype(np.uint8)
    img = (r.random((n, 28, 28)) * 60).astype(np.uint8)
    for i, c in enumerate(labels):
        img[i, 2 * c + 4:2 * c + 6, 4 + c:24] = 200 + r.integers(0, 50)
    return img, labels


def write_mnist(root, ntrain=1280, ntest=500, seed=7):
    d = os.path.join(root, "mnist")
    os.makedirs(d, exist_ok=True)
    for split, n, s in (("train", ntrain, seed), ("t10k", ntest, seed + 1)):
        img, lab = digits(n, s)
        with open(os.path.join(d, "%s-images-idx3-ubyte" % split), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img.tobytes())
        with open(os.path.join(d, "%s-labels-idx1-ubyte" % split), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + lab.tobytes())
    return root
