"""aneforge's tokenizer.json reader against the `tokenizers` package (issue 26).

Three byte-level BPE tokenizers are trained here with `tokenizers` itself (no download):
Llama-3-style (its split pattern, ignore_merges, special and chat tokens, the
<|begin_of_text|> template post-processor), Qwen2-style (its pattern: one digit per
piece, and its NFC normalizer) and SmolLM/GPT-2-style (ByteLevel's own regex). Each
encodes 1,600 texts built to reach the edge cases (Unicode letters, numbers and marks of
many scripts, emoji, every kind of whitespace and line break, contractions in any case,
long digit runs, special tokens inside text, invalid-free random code points, text NFC
changes: decomposed letters, marks out of canonical order, Hangul jamo, singletons and
excluded compositions), and `aneforge hf encode` must give exactly the ids
`Tokenizer.encode(text, add_special_tokens=False)` gives, `hf encode --special` those of
`encode(text)`, and `hf decode` the text `Tokenizer.decode(ids)` gives for the ids of
every text and for random id sequences (pieces of UTF-8 that do not join up).

usage: check_tokenizer.py ANEFORGE_BIN WORKDIR     (exit 77 when tokenizers is missing)
"""
import os
import random
import unicodedata
import subprocess
import sys

try:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
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
                if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co"):
                    break
            parts.append(chr(c))
    return "".join(parts)


FIXED = ["", " ", "  ", "\n", "\r\n", "a", "'s", "'S", "'ſ", "x's", "X'LL", "1234567", "  hello  ", "hello  \n  world",
         "\n\n\nx", "x\n\n\n", "<|eot_id|>", "<|eot_id|><|eot_id|>", "a<|im_start|>b", "<|im_start|", " <|end_of_text|> ",
         "\t\t\tindented", "trailing   ", "¾ of ⅫⅣ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301\u0301", "\u200b\u200b",
         "A\u030a", "\u212b\u2126\u212a", "a\u0323\u0301", "a\u0301\u0323", "\u1e9b\u0323", "\u0958\u0915\u093c",
         "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1100\u1161 \u1112\u1161\u11ab", "\u0301a", "q\u0307\u0323",
         "\u00c5\u0301", "\u0f73\u0f75\u0f81", "\U0001d15e\U0001d165", "\u0344\u0340\u0341\u0343", "\u0374\u037e\u0387"]
MARKS = [chr(c) for c in range(0x300, 0x370)] + ["\u0323", "\u0338", "\u05b0", "\u0e38", "\u302a", "\u3099", "\u309a"]
BASES = list("aeiouAEIOUnNcCsSzZyY") + ["\u0391", "\u03b1", "\u0415", "\u0438", "\u304b", "\u30cf", "\u1100", "\u1161", "\u11a8",
                                         "\uac00", "\u0627", "\u0915", "\u05d0", "<", "=", ">"]


def nfc_text():  # text NFC changes: bases with marks in any order, jamo, composed letters decomposed
    out = []
    for _ in range(rng.randint(1, 8)):
        out.append(rng.choice(BASES) + "".join(rng.choice(MARKS) for _ in range(rng.randint(0, 3))))
        if rng.random() < 0.3:
            out.append(unicodedata.normalize(rng.choice(["NFD", "NFKD"]), rng.choice(WORDS)))
        if rng.random() < 0.3:
            out.append(rng.choice(SPACES))
    return "".join(out)
TEXTS = FIXED + [text() for _ in range(1600)] + [nfc_text() for _ in range(400)]
CORPUS = [text() for _ in range(3000)]


def build(kind):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3 if kind == "llama3" else QWEN2), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(CORPUS, tr)
    if kind == "llama3":  # as Llama 3 ships it: <|begin_of_text|> first, offsets left alone
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                          special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])])
    elif kind == "qwen2":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    else:  # a BOS and an EOS, to check both sides of the template
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A <|end_of_text|>",
            special_tokens=[(t, tok.token_to_id(t)) for t in ("<|begin_of_text|>", "<|end_of_text|>")])
    path = os.path.join(WORK, kind + ".json")
    tok.save(path)
    return tok, path




def run(args, what):
    out = subprocess.run([BIN, "hf"] + args, capture_output=True)
    if out.returncode:
        print(f"{what}: FAILED: exit {out.returncode}: {out.stderr.decode(errors='replace').strip()}")
    return None if out.returncode else out.stdout


def compare(what, got, want, show):
    if got is None:
        return 1
    if len(got) != len(want):
        print(f"{what}: FAILED: {len(got)} results for {len(want)} inputs")
        return 1
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    if bad:
        print(f"{what}: FAILED: {len(bad)} of {len(want)} differ")
        for i in bad[:3]:
            print(f"  {show[i]!r}\n    ours   {got[i]!r}\n    theirs {want[i]!r}")
        return 1
    print(f"{what}: ok ({len(want)} equal)")
    return 0


failures = 0
texts_bin = os.path.join(WORK, "texts.bin")
with open(texts_bin, "wb") as f:
    f.write(b"\0".join(t.encode("utf-8") for t in TEXTS))
for kind in ("llama3", "qwen2", "gpt2"):
    tok, path = build(kind)
    enc = [tok.encode(t, add_special_tokens=False).ids for t in TEXTS]
    for special in (False, True):
        want = [" ".join(map(str, tok.encode(t, add_special_tokens=special).ids)) for t in TEXTS]
        out = run(["encode", path] + (["--special"] if special else []) + ["--file", texts_bin], kind)
        got = None if out is None else out.decode().split("\n")[:-1]
        failures += compare(f"{kind} encode{' --special' if special else ''}", got, want, TEXTS)
    # decoding: every text's ids with the special tokens in, and random ids (broken UTF-8)
    V = tok.get_vocab_size()
    seqs = [tok.encode(t).ids for t in TEXTS] + [[rng.randrange(V) for _ in range(rng.randint(0, 12))] for _ in range(600)]
    ids_file = os.path.join(WORK, kind + ".ids")
    with open(ids_file, "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for s in seqs))
    for keep in (False, True):
        want = [tok.decode(s, skip_special_tokens=not keep).encode("utf-8") for s in seqs]
        out = run(["decode", path] + (["--keep-special"] if keep else []) + ["--file", ids_file], kind)
        got = None
        if out is not None:  # each text after a line of its length
            got, at = [], 0
            while at < len(out):
                nl = out.index(b"\n", at)
                n = int(out[at:nl])
                got.append(out[nl + 1:nl + 1 + n])
                at = nl + 1 + n
        failures += compare(f"{kind} decode{' --keep-special' if keep else ''}", got, want, seqs)
sys.exit(1 if failures else 0)
