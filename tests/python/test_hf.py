"""Hugging Face folders from Python (aneforge.hf): llama2.c weights out as a folder and
back, a config field aneforge does not implement refused by name, fine-tuning through
af.Trainer with the trained values saved and read back."""
import json

import numpy as np
import pytest

import aneforge as af


def tiny_llama(seed=0):
    cfg = af.llama.config(None, 40, dim=32, hidden_dim=48, n_layers=1, n_heads=4, n_kv_heads=2, seq_len=16)
    w = af.llama.Weights.new(cfg)
    w.data[:] = (np.random.default_rng(seed).standard_normal(w.data.size) * 0.2).astype(np.float32)
    return w


def test_folder_round_trip(tmp_path):
    w = tiny_llama()
    m = af.hf.Model.from_llama(w)
    assert m.architecture == "LlamaForCausalLM"
    assert m.names[0] == "model.embed_tokens.weight"
    m.save(tmp_path / "m")
    back = af.hf.Model.load(tmp_path / "m")
    for n in m.names:
        np.testing.assert_array_equal(back.tensor(n), m.tensor(n))
    # v is copied as is; q's rows move from interleaved pairs to half-split ones
    np.testing.assert_array_equal(back.tensor("model.layers.0.self_attn.v_proj.weight"), w.tensor("wv", 0))
    q = back.tensor("model.layers.0.self_attn.q_proj.weight")
    np.testing.assert_array_equal(q[1], w.tensor("wq", 0)[2])
    np.testing.assert_array_equal(q[4], w.tensor("wq", 0)[1])
    np.testing.assert_array_equal(back.to_llama().data, w.data)


def test_unknown_field_refused(tmp_path):
    af.hf.Model.from_llama(tiny_llama()).save(tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    cfg["sliding_window_pattern"] = 4
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(af.Error, match='field "sliding_window_pattern" is not supported'):
        af.hf.Model.load(tmp_path / "m")


def test_fine_tune_and_save(tmp_path):
    m = af.hf.Model.from_llama(tiny_llama(1))
    seq, vocab = 8, m.vocab_size
    tokens = np.tile(np.arange(0, 40, 3), 20)
    idx = np.arange(0, 64, 4)
    x, y = af.llama.windows(tokens, seq, vocab, idx)
    tr = af.Trainer(af.hf.net(m, seq), dataset=(x, y), batch=4, lr=0.02)
    first = tr.step().loss
    for _ in range(15):
        last = tr.step().loss
    assert last < 0.5 * first
    m.update(tr)
    m.save(tmp_path / "tuned")
    back = af.hf.Model.load(tmp_path / "tuned")
    k = m.names.index("model.norm.weight")
    np.testing.assert_array_equal(back.tensor("model.norm.weight"), tr.params()[k].reshape(-1))
    assert np.abs(back.tensor("model.norm.weight") - af.hf.Model.from_llama(tiny_llama(1)).tensor("model.norm.weight")).max() > 1e-3


def test_lora_trains_adapters_only(tmp_path):
    m = af.hf.Model.from_llama(tiny_llama(2))
    before = m.tensor("model.layers.0.self_attn.q_proj.weight").copy()
    m.add_lora(4, 8, "q,v,down")
    assert m.names[0] == "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" and len(m.names) == 6
    tokens = np.tile(np.arange(0, 40, 3), 20)
    x, y = af.llama.windows(tokens, 8, m.vocab_size, np.arange(0, 64, 4))
    tr = af.Trainer(af.hf.net(m, 8), dataset=(x, y), batch=4, lr=0.05)
    first = tr.step().loss
    for _ in range(15):
        last = tr.step().loss
    assert last < 0.9 * first
    m.update(tr)
    m.save_lora(tmp_path / "adapter")
    m.merge_lora()
    assert len(m.names) > 6
    q = m.tensor("model.layers.0.self_attn.q_proj.weight")
    assert np.abs(q - before).max() > 1e-4  # the trained adapter folded in


def test_tokenizer_pieces_spell_the_text():
    """Encoding is exact: the ids' vocab strings, mapped back from GPT-2's byte characters,
    spell the text (the seed tokenizers of fuzz_hf_tokenizer; the tokenizers package is
    the reference in tests/hf/check_tokenizer.py)."""
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "corpus", "hf_tokenizer", "llama3.json")
    tok = af.hf.Tokenizer.load(path)
    vocab = {i: s for s, i in json.load(open(path))["model"]["vocab"].items()}
    vocab.update({a["id"]: a["content"] for a in json.load(open(path))["added_tokens"]})
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    back = {chr(b): b for b in bs}
    back.update({chr(256 + k): b for k, b in enumerate(b for b in range(256) if b not in bs)})
    text = "hello world's<|eot_id|> 12345"
    ids = tok.encode(text)
    out = b"".join(vocab[i].encode() if vocab[i].startswith("<|") else bytes(back[c] for c in vocab[i]) for i in ids)
    assert out.decode() == text
    with pytest.raises(af.Error, match="has no token"):
        tok.encode("\u00e9")  # a byte this tiny vocab never saw
