"""Hugging Face model folders (include/aneforge_hf.h): LlamaForCausalLM (Llama 2/3,
SmolLM), Qwen2ForCausalLM and Qwen3ForCausalLM from config.json and safetensors, trained
through af.Trainer (af_net_hf) and written back as a folder transformers loads; LoRA
adapters in PEFT's layout; tokenizer.json byte-level BPE."""
import ctypes

import numpy as np

from ._lib import Handle, check, cstr, encode, last_error, lib
from .data import _af_free
from .errors import CorruptError, InvalidError
from .train import BuiltinNet


class Model(Handle):
    """A Hugging Face model held in fp32 (af_hf_model)."""
    _free = "af_hf_free"
    _kind = "Hugging Face model"
    _null_error = CorruptError

    @classmethod
    def load(cls, folder):
        """Reads folder/config.json and its safetensors (F32, F16 or BF16, sharded or not)."""
        return cls(lib.af_hf_load(encode(str(folder), "folder")))

    @classmethod
    def from_llama(cls, weights):
        """A llama2.c model (af.llama.Weights) as LlamaForCausalLM: q and k rows move from
        llama2.c's interleaved RoPE pairs to Hugging Face's half-split ones."""
        return cls(lib.af_hf_from_llama(weights.ptr))

    @property
    def architecture(self):
        """The config's architecture, e.g. "LlamaForCausalLM"."""
        return cstr(lib.af_hf_architecture(self.ptr))

    @property
    def vocab_size(self):
        """The vocabulary size from config.json."""
        return lib.af_hf_vocab_size(self.ptr)

    @property
    def names(self):
        """The tensors' Hugging Face names, in the model's order (the trainer's params)."""
        return [cstr(lib.af_hf_param_name(self.ptr, i)) for i in range(lib.af_hf_param_count(self.ptr))]

    def tensor(self, name):
        """A writable float32 view of one tensor (valid while this model is open)."""
        names = self.names
        if name not in names:
            raise InvalidError("no tensor %r (the model has %s, ...)" % (name, ", ".join(names[:4])))
        i = names.index(name)
        s = lib.af_hf_param_shape(self.ptr, i)
        shape = tuple(s.dim[k] for k in range(s.rank))
        p = lib.af_hf_param_data(self.ptr, i)
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), shape)

    def update(self, trainer):
        """Copies a trainer's current params (one made from net(self, ...)) into the model."""
        vals = trainer.params()
        names = self.names
        if len(vals) != len(names):
            raise InvalidError("the trainer has %d params, this model %d tensors" % (len(vals), len(names)))
        for n, v in zip(names, vals):
            self.tensor(n)[...] = v.reshape(self.tensor(n).shape)

    def save(self, folder):
        """Writes folder/config.json and folder/model.safetensors (F32)."""
        check(lib.af_hf_save(self.ptr, encode(str(folder), "folder")))

    def add_lora(self, rank, alpha=None, targets="q,v", seed=1):
        """LoRA adapters (PEFT's layout) on the named projections; from now on the
        trainer's params are the adapters and the weights are frozen."""
        check(lib.af_hf_lora_add(self.ptr, int(rank), float(alpha if alpha else 2 * rank), encode(targets, "targets"),
                                 int(seed)))

    def load_lora(self, folder):
        """Reads a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors)."""
        check(lib.af_hf_lora_load(self.ptr, encode(str(folder), "folder")))

    def save_lora(self, folder):
        """Writes the adapters alone as a PEFT folder."""
        check(lib.af_hf_lora_save(self.ptr, encode(str(folder), "folder")))

    def merge_lora(self):
        """Folds the adapters into the weights (W += alpha / rank * B A) and drops them."""
        check(lib.af_hf_lora_merge(self.ptr))

    def to_llama(self):
        """The model in llama2.c's layout (af.llama.Weights); refused, naming the field,
        when af_llama cannot express it (biases, q/k norms, rope_theta, ...)."""
        from .llama import Weights
        p = lib.af_hf_to_llama(self.ptr)
        if not p:
            raise InvalidError(last_error())
        return Weights(p)


def net(model, seq):
    """The model for af.Trainer (objective custom: mean next-token CE): samples are `seq`
    token ids, targets one-hot [seq * vocab] (af.llama.windows makes both)."""
    n = lib.af_net_hf(model.ptr, int(seq))
    if not n.forward:
        raise InvalidError(last_error())
    return BuiltinNet(n, (int(seq),), int(seq) * model.vocab_size, "custom")


class Tokenizer(Handle):
    """A tokenizer.json of byte-level BPE (Llama 3, Qwen2, SmolLM): encode() gives the
    ids tokenizers' encode(text, add_special_tokens=False) gives."""
    _free = "af_hf_tokenizer_free"
    _kind = "tokenizer.json"
    _null_error = CorruptError

    @classmethod
    def load(cls, path):
        """Reads a tokenizer.json (byte-level BPE)."""
        return cls(lib.af_hf_tokenizer_load(encode(str(path), "path")))

    @property
    def vocab_size(self):
        """The number of token ids."""
        return lib.af_hf_tokenizer_vocab_size(self.ptr)

    def encode(self, text):
        """The ids of text (str or UTF-8 bytes) as an int32 NumPy array."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n = ctypes.c_void_p(), ctypes.c_int64()
        check(lib.af_hf_tokenizer_encode(self.ptr, b, len(b), ctypes.byref(ids), ctypes.byref(n)))
        try:
            return np.ctypeslib.as_array(ctypes.cast(ids, ctypes.POINTER(ctypes.c_int32)), (n.value,)).copy() \
                if n.value else np.zeros(0, np.int32)
        finally:
            _af_free(ids)
