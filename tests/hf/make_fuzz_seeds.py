"""Writes the seed files of fuzz_safetensors (tests/corpus/safetensors) with the
safetensors package itself: small files of each dtype aneforge reads, an empty one,
one with metadata, and one with a dtype it refuses (I64).

usage: make_fuzz_seeds.py OUTDIR   (needs numpy, torch and safetensors)"""
import os
import sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(0)
save_file({"w": torch.randn(2, 3, generator=g), "b": torch.randn(3, generator=g)}, os.path.join(out, "f32.safetensors"))
save_file({"w": torch.randn(2, 2, generator=g).half()}, os.path.join(out, "f16.safetensors"))
save_file({"model.norm.weight": torch.randn(4, generator=g).bfloat16(), "e": torch.zeros(0, 3)},
          os.path.join(out, "bf16-empty.safetensors"), metadata={"format": "pt"})
save_file({}, os.path.join(out, "none.safetensors"))
save_file({"ids": torch.arange(3)}, os.path.join(out, "i64.safetensors"))

# tokenizer.json seeds (tests/corpus/hf_tokenizer): small byte-level BPE files of the three
# split styles, trained here by the tokenizers package on a few lines (Qwen2's with its NFC
# normalizer, Llama 3's with its <|begin_of_text|> template, all with the ByteLevel decoder).
try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
except ImportError:
    sys.exit(0)
tdir = os.path.join(os.path.dirname(out.rstrip("/")), "hf_tokenizer")
os.makedirs(tdir, exist_ok=True)
L3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
Q2 = L3.replace(r"\p{N}{1,3}", r"\p{N}")
for name, pat in (("llama3", L3), ("qwen2", Q2), ("gpt2", None)):
    tok = Tokenizer(models.BPE(ignore_merges=name == "llama3"))
    tok.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False) if pat is None else pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pat), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.train_from_iterator(["hello world's 12345", "  x\n\ny"], trainers.BpeTrainer(
        vocab_size=20, special_tokens=["<|eot_id|>"], show_progress=False))
    tok.decoder = decoders.ByteLevel()
    if name == "qwen2":
        tok.normalizer = normalizers.NFC()
    if name == "llama3":
        tok.post_processor = processors.TemplateProcessing(single="<|eot_id|> $A", special_tokens=[("<|eot_id|>", 0)])
    tok.save(os.path.join(tdir, name + ".json"))
