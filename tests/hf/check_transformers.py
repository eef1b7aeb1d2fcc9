"""aneforge's Hugging Face models against transformers itself (issue 26).

For each architecture a tiny random model is made with transformers (fixed seed, no
download) and saved with save_pretrained; `aneforge hf forward` computes its logits, the
next-token loss and every gradient, which must equal PyTorch's (fp32: logits 1e-4
relative, gradients 1e-4 of each tensor's largest). Then `aneforge hf train` fine-tunes
it for a few steps and writes a folder that transformers' from_pretrained must load with
logits equal to ours. Also read: a bf16 checkpoint and a sharded one (index.json).
A Llama-2-shaped model goes through llama2.c's file (interleaved RoPE): greedy tokens of
`aneforge generate` equal transformers' generate, `train llama --plan pipeline` trains it
and `export --format hf` brings it back. Where peft is installed, LoRA's logits, adapter
gradients, trained adapters and --merge are checked against peft.

usage: check_transformers.py ANEFORGE_BIN WORKDIR
Exit 77 (ctest's skip) when torch, transformers or safetensors is missing.
"""
import copy
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file
except ImportError as e:  # reported as a skip by ctest (SKIP_RETURN_CODE 77)
    print(f"hf_transformers: skipped: {e}")
    sys.exit(77)

torch.set_num_threads(1)
BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
TOKENS = [[1, 5, 7, 9, 3, 11, 2, 40, 41, 77], [2, 8, 4, 6, 99, 13, 0, 55, 21, 3]]

ROPE_LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 4}


def configs():
    C = transformers
    common = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2, max_position_embeddings=64)
    rp = "rope_parameters" if "rope_parameters" in C.LlamaConfig().to_dict() else "rope_scaling"
    llama3_rope = {rp: ROPE_LLAMA3} if rp == "rope_parameters" else {"rope_theta": 500000.0, "rope_scaling": ROPE_LLAMA3}
    yield "llama3", C.LlamaForCausalLM, C.LlamaConfig(num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                                                        tie_word_embeddings=False, **llama3_rope, **common)
    yield "llama2_bias", C.LlamaForCausalLM, C.LlamaConfig(num_attention_heads=4, num_key_value_heads=4,
                                                             attention_bias=True, tie_word_embeddings=True, **common)
    smol = dict(common, hidden_size=48)
    yield "smollm", C.LlamaForCausalLM, C.LlamaConfig(num_attention_heads=3, num_key_value_heads=1, rms_norm_eps=1e-5,
                                                        tie_word_embeddings=True, **smol)
    yield "qwen2", C.Qwen2ForCausalLM, C.Qwen2Config(num_attention_heads=4, num_key_value_heads=2,
                                                       tie_word_embeddings=True, **common)
    yield "qwen3", C.Qwen3ForCausalLM, C.Qwen3Config(num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                                       tie_word_embeddings=False, **common)


def make(cls, cfg, seed=0):
    torch.manual_seed(seed)
    m = cls(cfg).float().eval()
    with torch.no_grad():  # norms start at ones and biases at zero: move them so both are tested
        for name, p in m.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.2 * torch.randn_like(p))
    return m


def ours_with(folder, tag, extra):
    out = os.path.join(WORK, tag + ".safetensors")
    rows = ";".join(",".join(map(str, r)) for r in TOKENS)
    subprocess.run([BIN, "hf", "forward", folder, "--tokens", rows, "-o", out] + extra, check=True)
    return load_file(out)


def ours(folder, tag):
    return ours_with(folder, tag, [])


def theirs(m):
    ids = torch.tensor(TOKENS)
    m.zero_grad()
    logits = m(ids[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    if loss.requires_grad:  # a peft model loaded for inference has nothing to differentiate
        loss.backward()
    grads = {n: p.grad.detach().numpy() for n, p in m.named_parameters() if p.grad is not None}
    return logits.detach().numpy(), loss.item(), grads


def close(a, b, rel, what):
    scale = max(np.abs(b).max(), 1e-6)
    err = np.abs(a - b).max() / scale
    if not err <= rel:
        raise AssertionError(f"{what}: max error {err:.3g} of the largest value (limit {rel})")
    return err


failures = 0
for tag, cls, cfg in configs():
    try:
        m = make(cls, cfg)
        folder = os.path.join(WORK, tag)
        m.save_pretrained(folder, safe_serialization=True)
        got = ours(folder, tag)
        logits, loss, grads = theirs(m)
        e1 = close(got["logits"], logits, 1e-4, f"{tag} logits")
        assert abs(float(got["loss"].reshape(-1)[0]) - loss) <= 1e-5 * max(1, abs(loss)), f"{tag} loss {got['loss']} vs {loss}"
        worst = 0
        for name, g in grads.items():
            if name == "lm_head.weight" and cfg.tie_word_embeddings:
                continue
            worst = max(worst, close(got["grad." + name], g, 1e-4, f"{tag} gradient of {name}"))
        # bf16 and sharded checkpoints of the same model
        m16 = make(cls, cfg)  # the reference keeps fp32 buffers (RoPE's inv_freq); only weights are rounded
        with torch.no_grad():
            for p in m16.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        copy.deepcopy(m16).to(torch.bfloat16).save_pretrained(folder + "_bf16", safe_serialization=True)
        close(ours(folder + "_bf16", tag + "_bf16")["logits"], theirs(m16)[0], 1e-4, f"{tag} bf16 logits")
        m.save_pretrained(folder + "_sharded", safe_serialization=True, max_shard_size="20KB")
        assert os.path.exists(os.path.join(folder + "_sharded", "model.safetensors.index.json")), "no shards written"
        close(ours(folder + "_sharded", tag + "_sharded")["logits"], logits, 1e-6, f"{tag} sharded logits")
        # fine-tune a few steps, export, load back with transformers
        data = os.path.join(WORK, "tokens.bin")
        np.random.default_rng(0).integers(0, cfg.vocab_size, 4000).astype("<u2").tofile(data)
        tuned = folder + "_tuned"
        subprocess.run([BIN, "hf", "train", folder, "--data", data, "-o", tuned, "--steps", "3", "--seq", "8",
                        "--batch", "2", "--lr", "0.01"], check=True)
        back = cls.from_pretrained(tuned).float().eval()
        tl, _, _ = theirs(back)
        e3 = close(ours(tuned, tag + "_tuned")["logits"], tl, 1e-4, f"{tag} exported logits")
        assert np.abs(tl - logits).max() > 1e-3, f"{tag}: training changed nothing"
        print(f"{tag}: ok (logits {e1:.2g}, gradients {worst:.2g}, exported {e3:.2g} of the largest)")
    except (AssertionError, subprocess.CalledProcessError) as e:
        failures += 1
        print(f"{tag}: FAILED: {e}")
# llama2.c's layout: a Llama-2-shaped model into llama2.c's file (interleaved RoPE pairs),
# greedy generation by aneforge generate's KV-cache forward against transformers', then
# back to a Hugging Face folder (aneforge export --format hf) that transformers loads.
try:
    common = dict(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2, max_position_embeddings=64)
    cfg = transformers.LlamaConfig(num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                                   tie_word_embeddings=False, **common)
    m = make(transformers.LlamaForCausalLM, cfg, seed=3)
    folder = os.path.join(WORK, "llama2c_src")
    m.save_pretrained(folder, safe_serialization=True)
    binf = os.path.join(WORK, "llama2c.bin")
    subprocess.run([BIN, "hf", "convert", "--to-llama", folder, "-o", binf], check=True)
    import json
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    compared = 0
    for prompt in ([5, 7, 9], [11, 3, 60], [42], [17, 18, 19, 20]):  # run.c stops at BOS (1): several prompts
        out = subprocess.run([BIN, "generate", "--model", binf, "--tokens", ",".join(map(str, prompt)), "--steps", "24",
                              "--temperature", "0", "--json", "--threads", "1"], check=True, capture_output=True, text=True)
        ours_tok = json.loads(out.stdout.strip().splitlines()[-1])["tokens"]
        ref = m.generate(torch.tensor([prompt]), max_new_tokens=24 - len(prompt), do_sample=False)[0].tolist()
        k = min(len(ours_tok), len(ref))
        assert ours_tok[:k] == ref[:k] and (k == len(ref) or ref[k] == 1), f"greedy tokens differ: ours {ours_tok}, transformers {ref}"
        compared += k - len(prompt)
    assert compared >= 20, f"only {compared} generated tokens compared"
    back = os.path.join(WORK, "llama2c_back")
    subprocess.run([BIN, "export", "--ckpt", binf, "--format", "hf", "-o", back], check=True)
    logits = theirs(m)[0]
    again = transformers.LlamaForCausalLM.from_pretrained(back).float().eval()
    e = close(theirs(again)[0], logits, 1e-6, "llama2.c round trip logits")
    # a Llama-2-shaped folder trains with train llama on the pipeline plan (af_net_llama's own)
    tuned_bin = os.path.join(WORK, "llama2c_pipeline.bin")
    subprocess.run([BIN, "train", "llama", "--init", folder, "--data", os.path.join(WORK, "tokens.bin"), "--steps", "3",
                    "--seq", "8", "--batch", "2", "--plan", "pipeline", "--export", tuned_bin], check=True,
                   capture_output=True)
    piped = os.path.join(WORK, "llama2c_pipeline")
    subprocess.run([BIN, "export", "--ckpt", tuned_bin, "--format", "hf", "-o", piped], check=True)
    pl = theirs(transformers.LlamaForCausalLM.from_pretrained(piped).float().eval())[0]
    close(ours(piped, "llama2c_pipeline")["logits"], pl, 1e-4, "pipeline-trained model in transformers")
    assert np.abs(pl - logits).max() > 1e-3, "the pipeline plan changed nothing"
    print(f"llama2c: ok ({compared} greedy tokens equal through llama2.c's layout; export back {e:.2g})")
except (AssertionError, subprocess.CalledProcessError, KeyError, ValueError) as e:
    failures += 1
    print(f"llama2c: FAILED: {e}")
# LoRA against peft: the gradients of every adapter for one batch, adapters trained by
# aneforge read by PeftModel.from_pretrained with equal logits, and --merge equal to
# peft's merge_and_unload.
try:
    import peft
except ImportError:
    peft = None
    print("lora: skipped: peft is not installed")
for tag in ("qwen3", "llama3") if peft else ():
    try:
        cls, cfg = {t: (c, g) for t, c, g in configs()}[tag]
        folder = os.path.join(WORK, tag)
        base = make(cls, cfg)
        lc = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, init_lora_weights=False,
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
        torch.manual_seed(5)
        pm = peft.get_peft_model(copy.deepcopy(base), lc).eval()
        adir = os.path.join(WORK, tag + "_adapter")
        pm.save_pretrained(adir)
        got = ours_with(folder, tag + "_lora", ["--adapter", adir])
        logits, loss, grads = theirs(pm)
        e1 = close(got["logits"], logits, 1e-4, f"{tag} LoRA logits")
        worst, n = 0, 0
        for name, g in grads.items():
            if "lora_" in name:
                key = "grad." + name.replace(".default", "")
                worst = max(worst, close(got[key], g, 1e-4, f"{tag} gradient of {name}"))
                n += 1
        assert n == 2 * 7 * cfg.num_hidden_layers, f"{n} adapter gradients compared"
        data = os.path.join(WORK, "tokens.bin")
        tuned = adir + "_tuned"
        train = [BIN, "hf", "train", folder, "--data", data, "--steps", "3", "--seq", "8", "--batch", "2", "--lr", "0.01"]
        subprocess.run(train + ["--adapter", adir, "-o", tuned], check=True)
        back = peft.PeftModel.from_pretrained(copy.deepcopy(base), tuned).eval()
        e2 = close(ours_with(folder, tag + "_lora_tuned", ["--adapter", tuned])["logits"], theirs(back)[0], 1e-4,
                   f"{tag} trained adapter in peft")
        new = train + ["--lora-rank", "4", "--lora-alpha", "16", "--lora-targets", "q,k,v,o,gate,up,down"]
        subprocess.run(new + ["-o", adir + "_new"], check=True)
        subprocess.run(new + ["--merge", "-o", folder + "_merged"], check=True)
        merged = peft.PeftModel.from_pretrained(copy.deepcopy(base), adir + "_new").merge_and_unload().eval()
        loaded = cls.from_pretrained(folder + "_merged").float().eval()
        ml = theirs(merged)[0]
        e3 = close(theirs(loaded)[0], ml, 1e-5, f"{tag} --merge against peft's merge_and_unload")
        assert np.abs(ml - theirs(base)[0]).max() > 1e-3, f"{tag}: LoRA training changed nothing"
        print(f"lora {tag}: ok (logits {e1:.2g}, {n} adapter gradients {worst:.2g}, trained in peft {e2:.2g}, merged {e3:.2g})")
    except (AssertionError, subprocess.CalledProcessError, KeyError) as e:
        failures += 1
        print(f"lora {tag}: FAILED: {e}")
sys.exit(1 if failures else 0)
