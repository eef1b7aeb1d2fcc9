"""train, eval and generate --init DIR on transformers-made folders (issue 26.6).

Tiny random Qwen3, Qwen2 and Llama 3 models are made with transformers (fixed seed, no
download), each with a byte-level BPE tokenizer trained here by `tokenizers` that holds
its family's special tokens, and its real chat template in tokenizer_config.json. Then:
- `generate --init DIR --tokens ... --temperature 0` gives transformers' greedy tokens;
- `generate --init DIR --chat Q --system S` starts from exactly the ids of
  apply_chat_template(..., add_generation_prompt=True) and continues as transformers'
  greedy generate with the end-of-turn token as EOS, and prints the reply as text;
- `eval llama --init DIR` gives PyTorch's mean next-token loss over the same windows;
- `train llama --init DIR` (the hf route: Qwen and Llama 3 are not Llama-2-shaped) writes
  a folder transformers loads, lowers the loss, and with --lora-rank a PEFT adapter
  folder; llama-only options are refused by name; an unknown chat template is refused.

usage: check_init.py ANEFORGE_BIN WORKDIR   (exit 77 without torch, transformers, tokenizers)
"""
import json
import os
import re
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:
    print(f"hf_init: skipped: {e}")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_templates import LLAMA3, QWEN2, QWEN3  # noqa: E402

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
BIN, WORK = sys.argv[1], sys.argv[2]
shutil.rmtree(WORK, ignore_errors=True)  # no outputs of an earlier run
os.makedirs(WORK)
CORPUS = ["the quick brown fox jumps over the lazy dog %d times, ünïcode ✓ 日本 and more" % i for i in range(300)]
failed = 0


def fail(msg):
    global failed
    failed += 1
    print("FAILED: " + msg)


def run(args, expect_rc=0):
    r = subprocess.run([BIN] + args, capture_output=True)
    if expect_rc is not None and r.returncode != expect_rc:
        fail(f"{' '.join(args)}: exit {r.returncode}, want {expect_rc}: {r.stderr.decode(errors='replace')[-800:]}")
    return r


def tokenizer(special, folder, tmpl, bos, eos):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=special, show_progress=False,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": tmpl, "bos_token": bos,
                   "eos_token": eos, "clean_up_tokenization_spaces": False}, f)
    return tok


def folders():
    C = transformers
    chatml = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    l3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    yield "qwen3", C.Qwen3ForCausalLM, C.Qwen3Config, dict(head_dim=24), chatml, QWEN3, None, "<|im_end|>", "<|im_end|>"
    yield "qwen2", C.Qwen2ForCausalLM, C.Qwen2Config, {}, chatml, QWEN2, None, "<|im_end|>", "<|im_end|>"
    yield "llama3", C.LlamaForCausalLM, C.LlamaConfig, dict(rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=500000.0), l3, LLAMA3, \
        "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"


def greedy(m, prompt, new, eos):
    out = m.generate(torch.tensor([prompt]), max_new_tokens=new, do_sample=False, eos_token_id=eos, pad_token_id=0,
                     attention_mask=torch.ones(1, len(prompt), dtype=torch.long))[0].tolist()[len(prompt):]
    cut = [out.index(e) for e in eos if e in out]  # ours stops before an EOS, transformers prints it
    return out[:min(cut)] if cut else out


def check(name, mcls, ccls, extra, special, tmpl, bos, eos, eot):
    folder = os.path.join(WORK, name)
    os.makedirs(folder, exist_ok=True)
    tok = tokenizer(special, folder, tmpl, bos, eos)
    V = tok.get_vocab_size()
    eos_id, eot_id = tok.token_to_id(eos), tok.token_to_id(eot)
    cfg = ccls(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=128, eos_token_id=eos_id, bos_token_id=0, **extra)
    torch.manual_seed(1)
    m = mcls(cfg).float().eval()
    m.save_pretrained(folder)
    # 1. ids in, greedy ids out
    prompt = [5, 17, 42, 9, 100]
    r = run(["generate", "--init", folder, "--tokens", ",".join(map(str, prompt)), "--steps", "40", "--temperature", "0",
             "--json"])
    if not r.returncode:
        got = json.loads(r.stdout)["tokens"][len(prompt):]
        want = greedy(m, prompt, 41 - len(prompt), [eos_id])  # --steps: positions, the first token's included
        if got != want:
            fail(f"{name}: generate --tokens: {got} != transformers' {want}")
    # 2. chat: the template's ids, then greedy to the end of the turn
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there, ünïcode ✓ 日本?"}]
    ht = transformers.AutoTokenizer.from_pretrained(folder)
    ids = ht.apply_chat_template(conv, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    r = run(["generate", "--init", folder, "--system", "Be brief.", "--chat", "Hello there, ünïcode ✓ 日本?", "--steps", "90",
             "--temperature", "0", "--json"])
    if not r.returncode:
        j = json.loads(r.stdout)
        if j["tokens"][:j["prompt_tokens"]] != ids:
            fail(f"{name}: generate --chat prompt {j['tokens'][:j['prompt_tokens']]} != apply_chat_template's {ids}")
        want = greedy(m, ids, 91 - len(ids), [eos_id, eot_id])
        if j["tokens"][len(ids):] != want:
            fail(f"{name}: generate --chat reply {j['tokens'][len(ids):]} != transformers' {want}")
        r = run(["generate", "--init", folder, "--system", "Be brief.", "--chat", "Hello there, ünïcode ✓ 日本?", "--steps",
                 "90", "--temperature", "0"])
        text = ht.decode(want, skip_special_tokens=True)
        if r.stdout.decode() != text + "\n":
            fail(f"{name}: generate --chat printed {r.stdout.decode()!r}, want the reply {text!r}")
    # 3. eval: the mean next-token loss over windows of 16 at stride 16
    rng = np.random.default_rng(3)
    data = rng.integers(0, V, 200).astype(np.uint16)
    data.tofile(os.path.join(WORK, name + ".bin"))
    r = run(["eval", "llama", "--init", folder, "--data", os.path.join(WORK, name + ".bin"), "--seq", "16", "--json"])
    if not r.returncode:
        T, n = 16, len(data)
        win = (n - 1) // T
        x = torch.tensor(np.stack([data[w * T:w * T + T] for w in range(win)]).astype(np.int64))
        y = torch.tensor(np.stack([data[w * T + 1:w * T + T + 1] for w in range(win)]).astype(np.int64))
        with torch.no_grad():
            want = torch.nn.functional.cross_entropy(m(x).logits.reshape(-1, V), y.reshape(-1)).item()
        got = json.loads(r.stdout)["loss"]
        if abs(got - want) > 1e-4 * max(1, abs(want)):
            fail(f"{name}: eval --init loss {got} != PyTorch's {want}")
    # 4. train llama --init: the hf route, full and LoRA
    out = os.path.join(WORK, name + "_tuned")
    r = run(["train", "llama", "--init", folder, "--data", os.path.join(WORK, name + ".bin"), "--steps", "8", "--seq", "16",
             "--lr", "0.01", "--export", out])
    if not r.returncode:
        losses = [float(v) for v in re.findall(rb"loss ([0-9.]+) ->", r.stderr)]
        last = re.findall(rb"-> ([0-9.]+)", r.stderr)
        if not losses or not last or float(last[-1]) >= losses[0]:
            fail(f"{name}: train llama --init did not lower the loss: {r.stderr.decode()[-300:]}")
        tuned = mcls.from_pretrained(out).float().eval()
        with torch.no_grad():
            if torch.equal(tuned(torch.tensor([prompt])).logits, m(torch.tensor([prompt])).logits):
                fail(f"{name}: the trained folder has the original weights")
    adir = os.path.join(WORK, name + "_lora")
    r = run(["train", "llama", "--init", folder, "--data", os.path.join(WORK, name + ".bin"), "--steps", "2", "--seq", "16",
             "--lora-rank", "4", "--lora-targets", "q,v", "--export", adir])
    if not r.returncode and not os.path.exists(os.path.join(adir, "adapter_config.json")):
        fail(f"{name}: train llama --init --lora-rank wrote no adapter_config.json")
    r = run(["train", "llama", "--init", folder, "--data", os.path.join(WORK, name + ".bin"), "--val",
             os.path.join(WORK, name + ".bin"), "--export", out], expect_rc=2)
    if b"--val is not available" not in r.stderr:
        fail(f"{name}: --val with the hf route: {r.stderr.decode()}")
    return 1


def main():
    n = sum(check(*f) for f in folders())
    # a template of no recognised family: --chat refused with the way out
    folder = os.path.join(WORK, "qwen3")
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    cfg["chat_template"] = "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
    odd = os.path.join(WORK, "odd")
    os.makedirs(odd, exist_ok=True)
    for fn in os.listdir(folder):
        if fn != "tokenizer_config.json" and not os.path.exists(os.path.join(odd, fn)):
            os.symlink(os.path.join(folder, fn), os.path.join(odd, fn))
    with open(os.path.join(odd, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    r = run(["generate", "--init", odd, "--chat", "hi", "--steps", "20"], expect_rc=2)
    if b"not one aneforge recognises" not in r.stderr or b"--prompt" not in r.stderr:
        fail(f"unknown template: {r.stderr.decode()}")
    print(f"hf_init: {n} folders (generate, chat, eval, train, LoRA) checked against transformers "
          f"{transformers.__version__}: {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
