"""llama2.c models from Python: files, run.c's forward against a NumPy transcription,
streaming generation, tokenizers, token files, fine-tuning."""
import types

import numpy as np
import pytest

import aneforge as af


def tiny(seed=0, vocab=259):
    cfg = af.llama.config("tiny", vocab)
    w = af.llama.Weights.new(cfg)
    r = np.random.default_rng(seed)
    d = w.data
    d[:] = (r.standard_normal(d.size) * 0.08).astype(np.float32)
    for l in range(cfg["n_layers"]):
        w.tensor("rms_att", l)[:] = 1 + 0.1 * r.standard_normal(cfg["dim"])
        w.tensor("rms_ffn", l)[:] = 1 + 0.1 * r.standard_normal(cfg["dim"])
    w.tensor("rms_final")[:] = 1.0
    return w


def numpy_forward(w, tokens):
    """run.c's transformer in NumPy (float64), all positions: logits [T, vocab]."""
    c = w.config
    D, H, KV, L = c["dim"], c["n_heads"], c["n_kv_heads"], c["n_layers"]
    hs = D // H
    T = lambda n, l=0: w.tensor(n, l).astype(np.float64)  # noqa: E731
    rms = lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g.reshape(-1)  # noqa: E731
    x = T("token_embedding")[tokens]
    n = len(tokens)
    pos = np.arange(n)[:, None]
    i = np.arange(0, hs, 2)
    ang = pos * (1.0 / 10000 ** (i / hs))
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(v, heads):
        v = v.reshape(n, heads, hs // 2, 2)
        a, b = v[..., 0], v[..., 1]
        c_, s_ = cos[:, None, :], sin[:, None, :]
        return np.stack([a * c_ - b * s_, a * s_ + b * c_], -1).reshape(n, heads, hs)
    for l in range(L):
        xb = rms(x, T("rms_att", l))
        q = rope(xb @ T("wq", l).T, H)
        k = rope(xb @ T("wk", l).T, KV)
        v = (xb @ T("wv", l).T).reshape(n, KV, hs)
        rep = H // KV
        k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
        s = np.einsum("thd,uhd->htu", q, k) / np.sqrt(hs)
        s = np.where(np.tril(np.ones((n, n), bool))[None], s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("htu,uhd->thd", a, v).reshape(n, D)
        x = x + o @ T("wo", l).T
        xb = rms(x, T("rms_ffn", l))
        h1, h3 = xb @ T("w1", l).T, xb @ T("w3", l).T
        x = x + (h1 / (1 + np.exp(-h1)) * h3) @ T("w2", l).T
    x = rms(x, T("rms_final"))
    return x @ T("token_embedding").T


def test_generator_logits_match_numpy_transcription():
    w = tiny()
    toks = [1, 40, 77, 5, 200, 33]
    ref = numpy_forward(w, toks)
    g = af.llama.Generator(w, threads=1)
    for p, t in enumerate(toks):
        g.feed(t)
        np.testing.assert_allclose(g.logits(), ref[p], rtol=1e-4, atol=1e-4)
    assert g.pos == len(toks)
    with pytest.raises(af.InvalidError):
        g.feed(259)  # outside the vocab


def test_save_load_both_versions_bit_identical(tmp_path):
    w = tiny(3)
    for v in (0, 1):
        p = tmp_path / ("m%d.bin" % v)
        w.save(str(p), version=v)
        back = af.llama.load(str(p))
        assert back.version == v and back.config == w.config
        assert back.data.tobytes() == w.data.tobytes()
    (tmp_path / "bad.bin").write_bytes(b"\0" * 20)
    with pytest.raises(af.Error, match="bad.bin"):
        af.llama.load(str(tmp_path / "bad.bin"))


def test_generate_streams_greedy_tokens():
    w = tiny(5)
    it = w.generate([1, 50], steps=12, temperature=0.0)
    assert isinstance(it, types.GeneratorType)
    toks = list(it)
    ref_prompt = [1, 50]
    # greedy against the NumPy forward, one position at a time
    seq = list(ref_prompt)
    for t in toks:
        assert t == int(np.argmax(numpy_forward(w, seq)[-1]))
        seq.append(t)
    assert len(toks) == 12 - 1 or 1 in toks
    text = "".join(af.llama.generate(w, [1], steps=5, tokenizer=af.Tokenizer.byte_level()))
    assert isinstance(text, str)
    s1 = list(w.generate([1], steps=20, temperature=1.0, top_p=0.9, seed=7))
    assert s1 == list(w.generate([1], steps=20, temperature=1.0, top_p=0.9, seed=7))  # a seed repeats


def test_tokenizers_and_token_files(tmp_path):
    bl = af.Tokenizer.byte_level()
    assert bl.vocab_size == 259
    ids = bl.encode("hi", bos=True)
    assert ids == [1, 3 + 32, 3 + ord("h"), 3 + ord("i")]
    assert bl.decode(ids) == "hi"
    docs = ["the cat sat on the mat", "the cat ate the rat"] * 20
    bpe = af.Tokenizer.train(docs, 300)
    enc = bpe.encode("the cat", bos=True)
    assert len(enc) < len(bl.encode("the cat", bos=True)) and bpe.decode(enc) == "the cat"
    bpe.save(str(tmp_path / "tok.bin"))
    back = af.Tokenizer.load(str(tmp_path / "tok.bin"))
    assert back.vocab_size == bpe.vocab_size and back.encode("the mat") == bpe.encode("the mat")
    af.write_tokens(str(tmp_path / "t.bin"), [1, 2, 300, 65535])
    np.testing.assert_array_equal(af.read_tokens(str(tmp_path / "t.bin")), [1, 2, 300, 65535])
    with pytest.raises(af.Error, match="300"):
        af.read_tokens(str(tmp_path / "t.bin"), vocab_size=259)
    with pytest.raises(af.InvalidError, match="uint16"):
        af.write_tokens(str(tmp_path / "u.bin"), [70000])
    with pytest.raises(af.CorruptError):
        af.Tokenizer.load(str(tmp_path / "t.bin"))


def test_fine_tune_lowers_the_loss_and_exports(tmp_path):
    w = tiny(7)
    tok = af.Tokenizer.byte_level()
    ids = np.array(tok.encode("abcabcabcabc " * 40, bos=True), np.uint16)
    losses = []
    out = af.llama.train(w, ids, seq=16, steps=30, batch=4, lr=3e-3, callback=lambda i: losses.append(i.loss))
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    out.save(str(tmp_path / "ft.bin"))
    assert af.llama.load(str(tmp_path / "ft.bin")).data.tobytes() == out.data.tobytes()
    assert out.data.tobytes() != w.data.tobytes()


def test_views_and_generators_outlive_close():
    w = tiny(9)
    view = w.tensor("wq", 0)
    g = af.llama.Generator(w, threads=1)
    ref = view.copy()
    w.close()
    with pytest.raises(af.ClosedError):
        w.config
    np.testing.assert_array_equal(view, ref)  # still the weights' memory, not freed
    g.feed(1)
    assert np.isfinite(g.logits()).all()
