"""PyTorch + peft side of bench/hf_lora.sh: LoRA (rank R, alpha 2R, all seven
projections) on the folder's model in fp32, Adam on the adapters, next-token loss on
random ids from the uint16 token file, the same batch and seq as aneforge's run.
Prints one line per step: "step N loss L ms T cpu_ms C" (wall, and the process's CPU time). PREC bf16 runs the step under
torch.autocast("cpu", torch.bfloat16) (weights and adapters stay fp32; the products run
in bf16, as aneforge's --precision bf16).
usage: python3 bench/hf_lora_torch.py DIR TOKENS STEPS BATCH SEQ THREADS RANK [fp32|bf16]"""
import sys, time
import numpy as np, torch, transformers, peft

d, data, steps, B, T, threads, R = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
prec = sys.argv[8] if len(sys.argv) > 8 else "fp32"
assert prec in ("fp32", "bf16"), prec
torch.set_num_threads(threads)
torch.manual_seed(0)
m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
m = peft.get_peft_model(m, peft.LoraConfig(r=R, lora_alpha=2 * R, lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
m.train()
opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-3)
tok = np.fromfile(data, dtype=np.uint16).astype(np.int64)
rng = np.random.default_rng(0)
for s in range(steps):
    at = rng.integers(0, len(tok) - T - 1, B)
    x = torch.from_numpy(np.stack([tok[a:a + T] for a in at]))
    y = torch.from_numpy(np.stack([tok[a + 1:a + T + 1] for a in at]))
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
        logits = m(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {s + 1} loss {loss.item():.4f} ms {(time.perf_counter() - t0) * 1e3:.1f} "
          f"cpu_ms {(time.process_time() - c0) * 1e3:.1f}", flush=True)
