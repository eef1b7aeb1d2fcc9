"""aneforge's chat templates against transformers' apply_chat_template (issue 26.6).

For each template family the supported models ship (Qwen2's and SmolLM2's ChatML with a
default system prompt, Qwen2.5's with tools, Qwen3's with its <think> handling and the
Thinking-2507 variant, Llama 3's, Llama 3.1's and 3.2's with their dated system turn, Llama 2's) this builds a byte-level BPE tokenizer with
`tokenizers` (trained here, no download) carrying that family's special tokens, writes
it to a folder with the real template string in tokenizer_config.json, and requires
aneforge's ids (aneforge.hf.Tokenizer.apply_chat_template, the C renderer) to equal
`AutoTokenizer.from_pretrained(dir).apply_chat_template(messages,
add_generation_prompt=..., tokenize=True)` for several conversations: with and without
a system message, multi-turn, Unicode, whitespace to trim, <think> blocks in history.
An unrecognised template must be refused.

usage: check_chat.py WORKDIR   (ANEFORGE_LIBRARY: the built library; exit 77 when
transformers or tokenizers is missing)
"""
import json
import os
import random
import sys

try:
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import aneforge.hf as hf
    from aneforge.errors import Error
except ImportError as e:
    print(f"hf_chat: skipped: {e}")
    sys.exit(77)

WORK = sys.argv[1]
os.makedirs(WORK, exist_ok=True)
transformers.logging.set_verbosity_error()

from chat_templates import LLAMA2, LLAMA3, LLAMA31, LLAMA32, QWEN2, QWEN25, QWEN3, QWEN3_THINKING, SMOLLM2  # noqa: E402

CHATML_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
FAMILIES = {  # name: (template, special tokens, added non-special tokens, bos, eos, our family)
    "qwen2": (QWEN2, CHATML_SPECIAL, [], None, "<|im_end|>", "chatml"),
    "qwen2.5": (QWEN25, CHATML_SPECIAL, [], None, "<|im_end|>", "chatml"),
    "smollm2": (SMOLLM2, CHATML_SPECIAL, [], "<|im_start|>", "<|im_end|>", "chatml"),
    "qwen3": (QWEN3, CHATML_SPECIAL, ["<think>", "</think>"], None, "<|im_end|>", "qwen3"),
    "qwen3-thinking": (QWEN3_THINKING, CHATML_SPECIAL, ["<think>", "</think>"], None, "<|im_end|>", "qwen3"),
    "llama3": (LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], [],
               "<|begin_of_text|>", "<|eot_id|>", "llama3"),
    "llama3.1": (LLAMA31, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
                 [], "<|begin_of_text|>", "<|eot_id|>", "llama3.1"),
    "llama3.2": (LLAMA32, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
                 [], "<|begin_of_text|>", "<|eot_id|>", "llama3.1"),  # today's date, as strftime_now gives it
    "llama2": (LLAMA2, ["<unk>", "<s>", "</s>"], [], "<s>", "</s>", "llama2"),
}

rng = random.Random(26)
WORDS = ("the quick brown fox It's don't naïve café Ünïcödé straße Привет мир 你好世界 こんにちは 안녕하세요 مرحبا "
         "🙂🚀 👨‍👩‍👧 a\u0301 12345 3.14 [INST] <<SYS>> think").split()
SPACES = [" ", "  ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\r\n"]


def text(lo=1, hi=10):
    return "".join(rng.choice(WORDS) + rng.choice(SPACES[:2] * 6 + SPACES) for _ in range(rng.randint(lo, hi))).strip(" ")


def conversations():
    conv = [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
         {"role": "user", "content": "Tell me a joke about ünïcode ✓ 日本語."}],
        [{"role": "system", "content": "  padded system \n"}, {"role": "user", "content": "\u00a0 trim me \t\n"},
         {"role": "assistant", "content": " answer \n"}, {"role": "user", "content": "again"}],
        [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "<think>\nreasoning one\n</think>\n\nanswer one"},
         {"role": "user", "content": "q2"}],
        [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\na1"},
         {"role": "user", "content": "q2"}, {"role": "assistant", "content": "\n\n<think>x</think>y<think>z</think>\nfinal"}],
        [{"role": "user", "content": "special tokens inside: <|im_end|> <|eot_id|> </s> [/INST]"}],
        [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    ]
    for _ in range(12):  # random alternating conversations
        turns = rng.randint(1, 4)
        c = [{"role": "system", "content": text()}] if rng.random() < 0.5 else []
        for t in range(turns):
            c.append({"role": "user", "content": text()})
            if t < turns - 1 or rng.random() < 0.3:
                c.append({"role": "assistant", "content": text()})
        conv.append(c)
    return conv


CORPUS = [text(5, 30) for _ in range(800)]


def build(name, special, added):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=700, special_tokens=special, show_progress=False,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if added:
        tok.add_tokens(added)
    folder = os.path.join(WORK, name)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return folder


def main():
    bad = compared = 0
    for name, (tmpl, special, added, bos, eos, family) in FAMILIES.items():
        folder = build(name, special, added)
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": tmpl, "bos_token": bos, "eos_token": eos,
               "model_max_length": 4096, "clean_up_tokenization_spaces": False}
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f)
        theirs = transformers.AutoTokenizer.from_pretrained(folder)
        ours = hf.Tokenizer.load(folder)
        if ours.chat_template.family != family:
            print(f"{name}: FAILED: recognised as {ours.chat_template.family}, not {family}")
            bad += 1
        for conv in conversations():
            for gen in (True, False):
                try:
                    want = theirs.apply_chat_template(conv, add_generation_prompt=gen, tokenize=True)
                except Exception as e:  # Llama 2 raises for roles that do not alternate
                    want = e
                if hasattr(want, "keys"):
                    want = want["input_ids"]
                try:
                    got = [int(i) for i in ours.apply_chat_template(conv, add_generation_prompt=gen)]
                except Error as e:
                    got = e
                compared += 1
                if isinstance(want, Exception) or isinstance(got, Exception):
                    if not (isinstance(want, Exception) and isinstance(got, Exception)):
                        print(f"{name}: FAILED: {conv} gen={gen}: transformers {want!r}, aneforge {got!r}")
                        bad += 1
                    continue
                if list(want) != got:
                    text_theirs = theirs.apply_chat_template(conv, add_generation_prompt=gen, tokenize=False)
                    print(f"{name}: FAILED: {conv} gen={gen}\n  transformers {text_theirs!r}\n  aneforge     "
                          f"{ours.apply_chat_template(conv, add_generation_prompt=gen, tokenize=False)!r}")
                    bad += 1
    # a template of another family is refused, naming the way out
    try:
        hf.ChatTemplate.parse("{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}")
        print("unrecognised template: FAILED: accepted")
        bad += 1
    except Error as e:
        if "raw prompt" not in str(e):
            print(f"unrecognised template: FAILED: message {e}")
            bad += 1
    print(f"hf_chat: {compared} renderings of {len(FAMILIES)} template families compared with transformers "
          f"{transformers.__version__}, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
