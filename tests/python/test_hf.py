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


LLAMA3_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                   "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
                   "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
                   "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
                   "{% endif %}")


def llama3_folder(tmp_path):
    """The fuzz seed's Llama 3 tokenizer with every byte (GPT-2's characters) in the vocab
    and Llama 3's chat tokens added, its template in tokenizer_config.json."""
    import os
    src = os.path.join(os.path.dirname(__file__), "..", "corpus", "hf_tokenizer", "llama3.json")
    d = json.load(open(src))
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars = [chr(b) for b in bs] + [chr(256 + k) for k in range(256 - len(bs))]
    special = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
    d["model"]["vocab"] = {t: i for i, t in enumerate(special + chars)}
    d["model"]["merges"] = []
    d["added_tokens"] = [dict(d["added_tokens"][0], id=i, content=t) for i, t in enumerate(special)]
    d["post_processor"] = None
    with open(tmp_path / "tokenizer.json", "w") as f:
        json.dump(d, f)
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        json.dump({"chat_template": LLAMA3_TEMPLATE, "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, f)
    return tmp_path


def test_chat_template_ids_are_the_rendered_text_with_special_ids(tmp_path):
    """apply_chat_template: Llama 3's text (written out here) with its special tokens as
    single ids (check_chat.py compares with transformers for every family)."""
    tok = af.hf.Tokenizer.load(llama3_folder(tmp_path))
    assert tok.chat_template.family == "llama3"
    msgs = [{"role": "system", "content": " be brief\n"}, {"role": "user", "content": "hello world's"}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nbe brief<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nhello world's<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n")
    ids = tok.apply_chat_template(msgs)
    assert list(ids) == list(tok.encode(text))
    for special in ("<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>"):
        assert tok.token_id(special) is not None and (ids == tok.token_id(special)).sum() >= 1
    assert tok.token_id("hello world's and more") is None
    assert tok.decode(ids, skip_special_tokens=False) == text
    assert "<|eot_id|>" not in tok.decode(ids)
    with pytest.raises(af.Error, match="role \"tool\""):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])
    with pytest.raises(af.Error, match="raw prompt"):
        af.hf.ChatTemplate.parse("{{ messages[0]['content'] }}")


def test_generate_equals_the_llama2c_generator():
    """hf.generate (the folder's forward, no KV cache, half-split RoPE) picks the same
    greedy tokens as llama2.c's KV-cache generator on the same model."""
    w = tiny_llama(3)
    m = af.hf.Model.from_llama(w)
    ours = af.hf.generate(m, prompt=[1, 5, 7, 9], max_new_tokens=11, temperature=0.0, stop=[1])
    ref = list(w.generate([1, 5, 7, 9], 15, 0.0))
    ref = ref[:ref.index(1)] if 1 in ref else ref
    assert len(ours) >= 3 and ours == ref[:len(ours)]
    with pytest.raises(af.Error, match="prompt"):
        af.hf.generate(m)
