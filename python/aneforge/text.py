"""Tokenizers in llama2.c's tokenizer.bin format and token files (uint16 .bin)."""
import ctypes

import numpy as np

from ._lib import C, Handle, check, encode, last_error, lib
from .data import _af_free
from .errors import CorruptError, InvalidError

BOS, EOS, UNK = C["AF_TOKEN_BOS"], C["AF_TOKEN_EOS"], C["AF_TOKEN_UNK"]


class Tokenizer(Handle):
    """A llama2.c tokenizer (af_tokenizer): load(path), byte_level(), train(docs, vocab)."""
    _free = "af_tokenizer_free"
    _kind = "tokenizer"
    _null_error = CorruptError

    @classmethod
    def load(cls, path):
        """Reads a llama2.c tokenizer.bin."""
        return cls(lib.af_tokenizer_load(encode(path, "path")))

    @classmethod
    def byte_level(cls):
        """259 tokens: the specials and one per byte (no merges)."""
        return cls(lib.af_tokenizer_byte_level())

    @classmethod
    def train(cls, docs, vocab_size):
        """Learns a BPE vocabulary of at most vocab_size (260..65536) tokens from docs."""
        bs = [d.encode("utf-8") if isinstance(d, str) else bytes(d) for d in docs]
        arr = (ctypes.c_char_p * max(1, len(bs)))(*bs)
        lens = (ctypes.c_size_t * max(1, len(bs)))(*[len(b) for b in bs])
        p = lib.af_tokenizer_train(len(bs), arr, lens, int(vocab_size))
        if not p:
            raise InvalidError(last_error())
        return cls(p)

    def save(self, path):
        """Writes the tokenizer as llama2.c's tokenizer.bin (atomically)."""
        check(lib.af_tokenizer_save(self.ptr, encode(path, "path")))

    @property
    def vocab_size(self):
        """The number of tokens."""
        return lib.af_tokenizer_vocab_size(self.ptr)

    def __len__(self):
        return self.vocab_size

    def token(self, i):
        """(bytes, score) of token i."""
        n, sc = ctypes.c_size_t(), ctypes.c_float()
        p = lib.af_tokenizer_token(self.ptr, int(i), ctypes.byref(n), ctypes.byref(sc))
        if not p:
            raise IndexError("token %d out of range (vocab %d)" % (i, self.vocab_size))
        return ctypes.string_at(p, n.value), sc.value

    def encode(self, text, bos=False, eos=False, prefix=True):
        """run.c's encoding: ids as a list of ints."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = (C["AF_ENCODE_BOS"] if bos else 0) | (C["AF_ENCODE_EOS"] if eos else 0) | \
            (0 if prefix else C["AF_ENCODE_NO_PREFIX"])
        out, n = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_int64()
        check(lib.af_tokenizer_encode(self.ptr, b, len(b), flags, ctypes.byref(out), ctypes.byref(n)))
        try:
            return [out[i] for i in range(n.value)]
        finally:
            _af_free(out)

    def decode(self, ids):
        """The text of token ids: each id's piece after the one before; BOS and EOS add nothing."""
        a = np.ascontiguousarray(ids, np.int32)
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.af_tokenizer_decode(self.ptr, a.ctypes.data, a.size, ctypes.byref(out), ctypes.byref(n)))
        try:
            return ctypes.string_at(out.value, n.value).decode("utf-8", "replace")
        finally:
            _af_free(out)

    def decode_piece(self, prev, token):
        """run.c's bytes for `token` after `prev` (-1: none)."""
        n = ctypes.c_size_t()
        p = lib.af_tokenizer_decode_piece(self.ptr, int(prev), int(token), ctypes.byref(n))
        if not p:
            raise IndexError("token %d out of range" % token)
        return ctypes.string_at(p, n.value)


def read_tokens(path, vocab_size=0):
    """A uint16 token file as a numpy int32 array (ids >= vocab_size rejected when > 0)."""
    out, n = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_int64()
    check(lib.af_tokens_read(encode(path, "path"), int(vocab_size), ctypes.byref(out), ctypes.byref(n)))
    try:
        return np.ctypeslib.as_array(out, (n.value,)).copy() if n.value else np.zeros(0, np.int32)
    finally:
        _af_free(out)


def write_tokens(path, tokens):
    """Writes token ids (0..65535) as a token file; a failed write removes the file."""
    a = np.asarray(tokens)
    if a.size and (a.min() < 0 or a.max() > 65535):
        raise InvalidError("token ids must fit uint16 (0..65535)")
    a = np.ascontiguousarray(a, np.int32)
    check(lib.af_tokens_write(encode(path, "path"), a.ctypes.data, a.size))
