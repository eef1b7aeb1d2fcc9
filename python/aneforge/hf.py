"""Hugging Face model folders (include/aneforge_hf.h): LlamaForCausalLM (Llama 2/3,
SmolLM), Qwen2ForCausalLM and Qwen3ForCausalLM from config.json and safetensors, trained
through af.Trainer (af_net_hf) and written back as a folder transformers loads; LoRA
adapters in PEFT's layout; tokenizer.json byte-level BPE; chat templates (ChatML, Qwen3,
Llama 3, Llama 2) and generation."""
import ctypes
import os

import numpy as np

from ._cdefs import af_chat_message
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


class ChatTemplate(Handle):
    """tokenizer_config.json's chat_template, recognised by its markers (af_hf_chat):
    family is "chatml", "qwen3", "llama3" or "llama2"; any other template is refused."""
    _free = "af_hf_chat_free"
    _kind = "chat template"
    _null_error = InvalidError

    @classmethod
    def load(cls, folder):
        """Reads folder/tokenizer_config.json (or folder/chat_template.jinja)."""
        return cls(lib.af_hf_chat_load(encode(str(folder), "folder")))

    @classmethod
    def parse(cls, template, bos_token=None, eos_token=None):
        """A template from its Jinja text and its special tokens."""
        return cls(lib.af_hf_chat_parse(encode(template, "template"), encode(bos_token, "bos_token") if bos_token else None,
                                        encode(eos_token, "eos_token") if eos_token else None, b"chat_template"))

    @property
    def family(self):
        """"chatml", "qwen3", "llama3" or "llama2"."""
        return cstr(lib.af_hf_chat_family(self.ptr))

    @property
    def end_of_turn(self):
        """The token that ends a turn ("<|im_end|>", "<|eot_id|>", Llama 2's eos)."""
        return cstr(lib.af_hf_chat_end_of_turn(self.ptr))

    def render(self, messages, add_generation_prompt=True):
        """The conversation's text, as apply_chat_template(..., tokenize=False)."""
        arr, keep = _messages(messages)
        text, n = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.af_hf_chat_render(self.ptr, arr, len(keep) // 2, int(bool(add_generation_prompt)), ctypes.byref(text),
                                    ctypes.byref(n)))
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            _af_free(text)


def _messages(messages):
    """[{"role": ..., "content": ...}] as an af_chat_message array (and the bytes it points at)."""
    keep = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise InvalidError("message %d must be a dict with 'role' and 'content'" % i)
        keep += [ctypes.create_string_buffer(encode(m["role"], "role")),
                 ctypes.create_string_buffer(encode(m["content"], "content"))]
    arr = (af_chat_message * max(1, len(keep) // 2))()
    for i in range(len(keep) // 2):
        arr[i].role, arr[i].content = ctypes.addressof(keep[2 * i]), ctypes.addressof(keep[2 * i + 1])
    return arr, keep


def _ids(ids, n):
    try:
        return np.ctypeslib.as_array(ctypes.cast(ids, ctypes.POINTER(ctypes.c_int32)), (n.value,)).copy() \
            if n.value else np.zeros(0, np.int32)
    finally:
        _af_free(ids)


class Tokenizer(Handle):
    """A tokenizer.json of byte-level BPE (Llama 3, Qwen2, SmolLM): encode() gives the
    ids tokenizers' encode(text, add_special_tokens=False) gives; loaded from a model
    folder it also has the folder's chat template (apply_chat_template)."""
    _free = "af_hf_tokenizer_free"
    _kind = "tokenizer.json"
    _null_error = CorruptError
    _folder = None

    @classmethod
    def load(cls, path):
        """Reads a tokenizer.json (byte-level BPE), or a model folder's tokenizer.json
        (and then its tokenizer_config.json's chat template when asked for)."""
        path = str(path)
        folder = path if os.path.isdir(path) else None
        t = cls(lib.af_hf_tokenizer_load(encode(os.path.join(path, "tokenizer.json") if folder else path, "path")))
        t._folder = folder
        return t

    @property
    def chat_template(self):
        """The folder's ChatTemplate (InvalidError naming the problem when there is none
        or it is not one aneforge renders)."""
        if getattr(self, "_chat", None) is None:
            if not self._folder:
                raise InvalidError("this tokenizer was loaded from a file, not a model folder: no chat template "
                                   "(load the folder, or use ChatTemplate.parse)")
            self._chat = ChatTemplate.load(self._folder)
        return self._chat

    def token_id(self, token):
        """The id of a token given by its text (e.g. "<|im_end|>"), or None."""
        i = lib.af_hf_tokenizer_token_id(self.ptr, encode(token, "token"))
        return None if i < 0 else int(i)

    def decode(self, ids, skip_special_tokens=True):
        """The text of ids, as tokenizers' decode(ids, skip_special_tokens)."""
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int64).astype(np.int32))
        text, n = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.af_hf_tokenizer_decode(self.ptr, a.ctypes.data, a.size, int(bool(skip_special_tokens)), ctypes.byref(text),
                                         ctypes.byref(n)))
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            _af_free(text)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, chat_template=None):
        """The conversation as transformers' apply_chat_template gives it: ids (int32
        array), or the text with tokenize=False. chat_template: a ChatTemplate to use
        instead of the folder's."""
        ct = chat_template or self.chat_template
        if not tokenize:
            return ct.render(messages, add_generation_prompt)
        arr, keep = _messages(messages)
        ids, n = ctypes.c_void_p(), ctypes.c_int64()
        check(lib.af_hf_chat_encode(ct.ptr, self.ptr, arr, len(keep) // 2, int(bool(add_generation_prompt)),
                                    ctypes.byref(ids), ctypes.byref(n)))
        return _ids(ids, n)

    @property
    def vocab_size(self):
        """The number of token ids."""
        return lib.af_hf_tokenizer_vocab_size(self.ptr)

    def encode(self, text, add_special_tokens=False):
        """The ids of text (str or UTF-8 bytes) as an int32 NumPy array; with
        add_special_tokens the post-processor's template too (Llama 3's BOS), as
        tokenizers' encode(text) gives."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n = ctypes.c_void_p(), ctypes.c_int64()
        f = lib.af_hf_tokenizer_encode_special if add_special_tokens else lib.af_hf_tokenizer_encode
        check(f(self.ptr, b, len(b), ctypes.byref(ids), ctypes.byref(n)))
        return _ids(ids, n)


class Generator(Handle):
    """The model one token at a time with a KV cache (af_hf_gen), fp32 on the CPU."""
    _free = "af_hf_gen_free"
    _kind = "generator"
    _null_error = InvalidError

    def __init__(self, model, threads=0):
        super().__init__(lib.af_hf_gen_new(model.ptr, int(threads)))
        self._model = model  # it reads the model's weights: keep it alive
        self.vocab = model.vocab_size

    def feed(self, token):
        """Appends one token id at the next position."""
        check(lib.af_hf_gen_feed(self.ptr, int(token)))

    def logits(self):
        """A copy of the next token's logits (vocab floats)."""
        p = lib.af_hf_gen_logits(self.ptr)
        if not p:
            raise InvalidError("no logits before the first feed")
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), (self.vocab,)).copy()


def generate(model, tokenizer=None, prompt=None, messages=None, max_new_tokens=64, temperature=0.0, top_p=0.9, seed=1,
             threads=0, stop=None):
    """Generated token ids (a list) after a prompt: ids, text (encoded with the
    post-processor's special tokens, as tokenizers' encode(text)) or chat messages
    (apply_chat_template with the generation prompt). Stops at config.json's
    eos_token_id, the chat template's end-of-turn token with messages, or ids in stop;
    temperature 0 is greedy. run.c's sampler (af.llama.Sampler) draws the rest."""
    from .llama import Sampler
    if (prompt is None) == (messages is None):
        raise InvalidError("give prompt (ids or text) or messages, one of them")
    stops = set(int(i) for i in (stop or ()))
    n = lib.af_hf_eos_ids(model.ptr, None, 0)
    buf = (ctypes.c_int32 * max(1, n))()
    lib.af_hf_eos_ids(model.ptr, buf, n)
    stops.update(buf[i] for i in range(n))
    if messages is not None:
        if tokenizer is None:
            raise InvalidError("messages need a tokenizer loaded from the model folder")
        ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
        eot = tokenizer.token_id(tokenizer.chat_template.end_of_turn)
        if eot is not None:
            stops.add(eot)
    elif isinstance(prompt, (str, bytes)):
        if tokenizer is None:
            raise InvalidError("a text prompt needs a tokenizer")
        ids = list(tokenizer.encode(prompt, add_special_tokens=True))
    else:
        ids = [int(i) for i in prompt]
    if not ids:
        raise InvalidError("the prompt is empty")
    g, s, out = Generator(model, threads), Sampler(model.vocab_size, temperature, top_p, seed), []
    try:
        for t in ids:
            g.feed(t)
        for _ in range(int(max_new_tokens)):
            t = s.sample(g.logits())
            if t in stops:
                break
            out.append(t)
            g.feed(t)
    finally:
        g.close()
        s.close()
    return out
