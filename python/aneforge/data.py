"""Datasets (MNIST, Fashion-MNIST, CIFAR-10 from their files) and .npy files."""
import ctypes
import os

import numpy as np

from ._lib import C, Handle, check, encode, last_error, lib
from .errors import Error, InvalidError

KINDS = {"mnist": C["AF_DATA_MNIST"], "fashion": C["AF_DATA_FASHION"], "fashion-mnist": C["AF_DATA_FASHION"],
         "cifar10": C["AF_DATA_CIFAR10"]}
# The per-dataset pixel statistics the CLI standardises with (tools/cmd_train.c).
NORM = {"mnist": (0.1307, 0.3081), "fashion": (0.2860, 0.3530), "cifar10": (0.4734, 0.2516)}


class Dataset(Handle):
    """Samples held in memory (af_dataset). Dataset.load("mnist", dir, train=True)."""
    _free = "af_dataset_free"
    _kind = "dataset"

    def __init__(self, ptr, kind=None):
        if not ptr:
            raise _error()
        super().__init__(ptr)
        self.kind = kind

    @classmethod
    def load(cls, kind, dir=None, train=True):
        """The train or test split of "mnist", "fashion" or "cifar10" from dir
        (<dir>/mnist/..., default ./data)."""
        if kind not in KINDS:
            raise InvalidError("dataset %r: one of %s" % (kind, sorted(KINDS)))
        return cls(lib.af_dataset_load(KINDS[kind], encode(dir, "dir") if dir else None, 1 if train else 0),
                   kind.replace("fashion-mnist", "fashion"))

    @classmethod
    def from_idx(cls, images, labels):
        """A dataset from a pair of IDX files (MNIST's format): images and labels."""
        return cls(lib.af_dataset_load_idx(encode(images, "images"), encode(labels, "labels")))

    @classmethod
    def from_cifar(cls, paths):
        """A dataset from CIFAR-10 binary files (data_batch_1.bin, ...), concatenated in order."""
        arr = (ctypes.c_char_p * len(paths))(*[encode(p, "path") for p in paths])
        return cls(lib.af_dataset_load_cifar(len(paths), arr))

    def __len__(self):
        return int(lib.af_dataset_count(self.ptr))

    @property
    def sample_shape(self):
        """One sample's shape (channels, height, width)."""
        c, h, w = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        lib.af_dataset_sample_shape(self.ptr, ctypes.byref(c), ctypes.byref(h), ctypes.byref(w))
        return (c.value, h.value, w.value)

    @property
    def classes(self):
        """The number of classes."""
        return lib.af_dataset_classes(self.ptr)

    @property
    def labels(self):
        """A copy of every sample's label, uint8."""
        n = len(self)
        p = lib.af_dataset_labels(self.ptr)
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_uint8)), (n,)).copy()

    def batch(self, idx):
        """x [n, c, h, w] in [0, 1] and one-hot [n, classes] for the sample indices."""
        idx = np.ascontiguousarray(idx, np.int64)
        x = np.empty((len(idx),) + self.sample_shape, np.float32)
        y = np.empty((len(idx), self.classes), np.float32)
        check(lib.af_dataset_batch(self.ptr, len(idx), idx.ctypes.data, x.ctypes.data, y.ctypes.data))
        return x, y

    def arrays(self):
        """The whole split: (x [n, c, h, w] float32, one-hot [n, classes])."""
        return self.batch(np.arange(len(self)))


def load(kind, dir=None, train=True):
    """Dataset.load(kind, dir, train): the train or test split of mnist, fashion or cifar10."""
    return Dataset.load(kind, dir, train)


def _error():
    from .errors import raise_status
    msg = last_error()
    st = C["AF_ERR_IO"] if "fetch" in msg or "open" in msg or "No such" in msg else C["AF_ERR_CORRUPT"]
    try:
        raise_status(st, msg)
    except Error as e:
        return e


def npy_read(path):
    """A .npy file (v1/v2, '<f4' or '<f2') as a float32 array."""
    data = ctypes.POINTER(ctypes.c_float)()
    rank = ctypes.c_int()
    dims = (ctypes.c_int64 * C["AF_MAX_RANK"])()
    check(lib.af_npy_read(encode(path, "path"), ctypes.byref(data), ctypes.byref(rank), dims))
    shape = tuple(dims[i] for i in range(rank.value))
    n = int(np.prod(shape, dtype=np.int64))
    try:
        out = np.ctypeslib.as_array(data, (max(n, 1),))[:n].reshape(shape).copy() if n else np.zeros(shape, np.float32)
    finally:
        _af_free(data)
    return out


def npy_write(path, arr):
    """Writes a v1.0 '<f4' .npy file (no partial file on failure)."""
    a = np.ascontiguousarray(arr, np.float32)
    dims = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
    check(lib.af_npy_write(encode(path, "path"), a.ctypes.data, a.ndim, dims))


def _af_free(p):
    """Frees an array the library handed over, with the library's af_free."""
    lib.af_free(ctypes.cast(p, ctypes.c_void_p))
