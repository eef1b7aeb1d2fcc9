"""Small PyTorch models (traced) for check_coremltools.py: an MLP, a CNN with batch norm
and pooling, a transformer block. Each returns (traced module, {input name: array})."""
import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    """A pre-norm transformer block: attention (causal mask) and a SiLU MLP."""

    def __init__(self, d=16, heads=2, t=6):
        super().__init__()
        self.t = t  # fixed: shape arithmetic on traced sizes would become int casts
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))
        self.h, self.d = heads, d
        self.register_buffer("mask", torch.triu(torch.full((t, t), -1e4), 1))

    def forward(self, x):
        t, d, h = self.t, self.d, self.h
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(1, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        a = (q @ k.transpose(-1, -2)) * float(1 / np.sqrt(d // h))
        a = a + self.mask
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(1, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.n2(x))


def cases():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 5))
    cnn[1].running_mean.uniform_(-0.5, 0.5)
    cnn[1].running_var.uniform_(0.5, 1.5)
    out = []
    for name, model, shape in (("torch_mlp", mlp, (2, 3, 4)), ("torch_cnn", cnn, (2, 3, 8, 8)), ("torch_block", Block(), (1, 6, 16))):
        model.eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            traced = torch.jit.trace(model, x)
            ref = model(x).numpy()
        out.append((name, traced, {"x": x.numpy()}, ref))
    return out
