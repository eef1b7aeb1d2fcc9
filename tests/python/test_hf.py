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
