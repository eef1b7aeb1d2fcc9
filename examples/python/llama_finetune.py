#!/usr/bin/env python3
"""Fine-tune a llama2.c model on a text file and sample from it, streaming.

    python3 examples/python/llama_finetune.py --model stories15M.bin --tokenizer tokenizer.bin \
        --text story.txt --steps 200 --out tuned.bin
Without --model a tiny random model (the "tiny" preset) is trained from scratch; without
--tokenizer the byte-level one. The result is a llama2.c file run.c reads (version 0).
"""
import argparse
import sys

import numpy as np

import aneforge as af


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--tokenizer")
    ap.add_argument("--text", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--out", default="tuned.bin")
    ap.add_argument("--sample", type=int, default=100, help="tokens to generate after training")
    a = ap.parse_args()

    tok = af.Tokenizer.load(a.tokenizer) if a.tokenizer else af.Tokenizer.byte_level()
    if a.model:
        model = af.llama.load(a.model)
    else:
        model = af.llama.Weights.new(af.llama.config("tiny", tok.vocab_size))
        r = np.random.default_rng(1)
        model.data[:] = (r.standard_normal(model.data.size) * 0.02).astype(np.float32)
        for l in range(model.config["n_layers"]):
            model.tensor("rms_att", l)[:] = 1
            model.tensor("rms_ffn", l)[:] = 1
        model.tensor("rms_final")[:] = 1
    ids = np.array(tok.encode(open(a.text, encoding="utf-8").read(), bos=True), np.uint16)
    print("%d tokens, model %s" % (len(ids), model.config))

    def progress(info):
        if info.step % 20 == 0:
            print("step %4d  loss %.4f" % (info.step, info.loss), flush=True)
    tuned = af.llama.train(model, ids, seq=a.seq, steps=a.steps, batch=a.batch, lr=a.lr, callback=progress)
    tuned.save(a.out)
    print("saved %s" % a.out)
    for piece in af.llama.generate(tuned, [1], steps=a.sample, temperature=0.8, top_p=0.9, seed=42, tokenizer=tok):
        sys.stdout.write(piece)
        sys.stdout.flush()
    print()


if __name__ == "__main__":
    main()
