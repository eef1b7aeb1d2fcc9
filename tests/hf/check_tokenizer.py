"""aneforge's tokenizer.json reader against the `tokenizers` package (issue 26).

Three byte-level BPE tokenizers are trained here with `tokenizers` itself (no download):
Llama-3-style (its split pattern, ignore_merges, special and chat tokens), Qwen2-style
(its pattern: one digit per piece) and SmolLM/GPT-2-style (ByteLevel's own regex). Each
encodes 1,600 texts built to reach the edge cases (Unicode letters, numbers and marks of
many scripts, emoji, every kind of whitespace and line break, contractions in any case,
long digit runs, special tokens inside text, invalid-free random code points), and
`aneforge hf encode` must give exactly the ids `Tokenizer.encode(text,
add_special_tokens=False)` gives.

usage: check_tokenizer.py ANEFORGE_BIN WORKDIR     (exit 77 when tokenizers is missing)
"""
import os
import random
import subprocess
import sys

try:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:
    print(f"hf_tokenizer: skipped: {e}")
    sys.exit(77)

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<|im_start|>", "<|im_end|>"]

rng = random.Random(26)
WORDS = ("the quick brown fox jumps over lazy dog It's I'M we'LL they've you'D don't CAN'T naïve café Ünïcödé "
         "straße ſome Привет мир Γειά σου κόσμε 你好世界 こんにちは 안녕하세요 مرحبا שלום नमस्ते ไทย "
         "१२३ ٣٤٥ ⅫⅣ ½¾ ²³ 12345678 3.14159 1,000,000 0x1F e=mc² 🙂🚀👍🏽 👨‍👩‍👧 a\u0301 e\u0308 ｆｕｌｌｗｉｄｔｈ").split()
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\n ", "\u00a0", "\u3000", "\u2028", "\u2003", "\u0085",
          "\x0b", "\x0c", " \t\n", "\r", "\x1c", "\u200b"]
PUNCT = list("!?.,;:'\"()[]{}<>-_/\\|@#$%^&*+=~`") + ["...", "--", "’", "“”", "«»", "—", "¿¡", "。、"]


def text():
    parts = []
    for _ in range(rng.randint(0, 14)):
        r = rng.random()
        if r < 0.45:
            parts.append(rng.choice(WORDS))
        elif r < 0.7:
            parts.append(rng.choice(SPACES))
        elif r < 0.85:
            parts.append(rng.choice(PUNCT))
        elif r < 0.9:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
        elif r < 0.95:
            parts.append(rng.choice(SPECIAL))
        else:  # a random assigned code point from the long-settled planes
            while True:
                c = rng.choice([rng.randint(0x20, 0x2FFF), rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD),
                                rng.randint(0x1F300, 0x1FAFF)])
                import unicodedata
                if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co"):
                    break
            parts.append(chr(c))
    return "".join(parts)


FIXED = ["", " ", "  ", "\n", "\r\n", "a", "'s", "'S", "'ſ", "x's", "X'LL", "1234567", "  hello  ", "hello  \n  world",
         "\n\n\nx", "x\n\n\n", "<|eot_id|>", "<|eot_id|><|eot_id|>", "a<|im_start|>b", "<|im_start|", " <|end_of_text|> ",
         "\t\t\tindented", "trailing   ", "¾ of ⅫⅣ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301\u0301", "\u200b\u200b"]
TEXTS = FIXED + [text() for _ in range(1600)]
CORPUS = [text() for _ in range(3000)]


def build(kind):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(CORPUS, tr)
    path = os.path.join(WORK, kind + ".json")
    tok.save(path)
    return tok, path


failures = 0
with open(os.path.join(WORK, "texts.bin"), "wb") as f:
    f.write(b"\0".join(t.encode("utf-8") for t in TEXTS))
for kind in ("llama3", "qwen2", "gpt2"):
    tok, path = build(kind)
    want = [" ".join(map(str, tok.encode(t, add_special_tokens=False).ids)) for t in TEXTS]
    out = subprocess.run([BIN, "hf", "encode", path, "--file", os.path.join(WORK, "texts.bin")], capture_output=True,
                         text=True)
    got = out.stdout.split("\n")[:-1]
    if out.returncode or len(got) != len(TEXTS):
        print(f"{kind}: FAILED: exit {out.returncode}, {len(got)} lines for {len(TEXTS)} texts: {out.stderr.strip()}")
        failures += 1
        continue
    bad = [i for i in range(len(TEXTS)) if got[i] != want[i]]
    if bad:
        failures += 1
        print(f"{kind}: FAILED: {len(bad)} of {len(TEXTS)} texts differ")
        for i in bad[:3]:
            print(f"  {TEXTS[i]!r}\n    ours   {got[i]}\n    theirs {want[i]}")
    else:
        ntok = sum(len(w.split()) for w in want)
        print(f"{kind}: ok ({len(TEXTS)} texts, {ntok} tokens equal)")
sys.exit(1 if failures else 0)
