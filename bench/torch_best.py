"""PyTorch at its best in our comparisons: the optimizer its current release runs fastest.

PyTorch 2.4 and later have a fused Adam/AdamW kernel for CPU tensors (one pass over each
parameter's value, gradient and moments). It is not the default there (that is a Python
loop over the parameters), and it took a tenth off PyTorch 2.13's llama b step and a
third off its MNIST MLP step (bench/compare_torch.sh, Sapphire Rapids, 2 threads), so the
comparisons ask for it. A PyTorch without it (Debian's 1.13) keeps the kind it was given.
"""
import torch


def adam(cls, params, **kw):
    """cls (torch.optim.Adam or AdamW) on params: fused where this PyTorch has it on the
    CPU, else with the keyword arguments alone. Returns (optimizer, kind): kind is "fused",
    "foreach" (the fallback asked for it) or "default" (PyTorch's per-parameter loop)."""
    params = list(params)
    try:
        return cls(params, fused=True, **{k: v for k, v in kw.items() if k != "foreach"}), "fused"
    except (TypeError, RuntimeError):  # no fused argument, or no CPU kernel for it
        return cls(params, **kw), "foreach" if kw.get("foreach") else "default"
