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
