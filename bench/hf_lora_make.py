"""Writes a Qwen3-0.6B-shaped model with random weights (seed 0) made by transformers
itself (no download): the configuration of Qwen/Qwen3-0.6B's config.json, BF16 on disk.
usage: python3 bench/hf_lora_make.py DIR [LAYERS]   (LAYERS: fewer than 28 for a quick check)"""
import sys, torch, transformers
torch.manual_seed(0)
c = transformers.Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=int(sys.argv[2]) if len(sys.argv) > 2 else 28,
                             num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                             rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=True,
                             bos_token_id=151643, eos_token_id=151645)
m = transformers.Qwen3ForCausalLM(c).to(torch.bfloat16)
print(f"{sum(p.numel() for p in m.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)
m.save_pretrained(sys.argv[1])
