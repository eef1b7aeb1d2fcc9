#!/usr/bin/env python3
"""The `train --log` JSON lines of mlp (host, device and resident plans, cpu and ane-sim)
and llama carry what the dashboard and report read (docs/cli.md, "Log lines"): a header with
the run's configuration first, then step lines with ms/step by phase, throughput and
the engine accounting, evaluation lines, and an end line. Cross-checked against the
command's own --json result, the cost model's per-step estimate and each other:
the phases fit inside the step time, the step program's time is under fwd+bwd
(optimizer 0) on the resident plan and split on the device plan, totals grow.

usage: check_train_log.py AF_CLI SOURCE_DIR"""
import json, math, os, shutil, struct, subprocess, sys, tempfile
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_util import check, finish, records  # noqa: E402

cli, src = sys.argv[1], sys.argv[2]


tmp = tempfile.mkdtemp(prefix="af_trainlog_")
os.symlink(os.path.join(src, "tests", "data", "mnist-subset"), os.path.join(tmp, "mnist"))
env = dict(os.environ, ANEFORGE_DATA=tmp)


def train(args, log):
    if os.path.exists(log):
        os.remove(log)
    r = subprocess.run([cli, "train"] + args + ["--log", log, "--json"], capture_output=True, text=True, env=env, cwd=tmp,
                       timeout=120)
    check(r.returncode == 0, "train %s: %s" % (" ".join(args), r.stderr[-400:]))
    result = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    return [json.loads(l) for l in open(log)] if os.path.exists(log) else [], result


STEP_KEYS = ["elapsed_s", "ms_step", "ms_data", "ms_fwd_bwd", "ms_optimizer", "ms_compile", "dispatches", "bytes_in",
             "bytes_out", "engine_flops", "host_flops", "compiles"]

for plan, target in [("host", "cpu"), ("device", "ane-sim:m1"), ("resident", "ane-sim:m5")]:
    what = "mlp %s on %s" % (plan, target)
    recs, res = train(["mlp", "--data", "mnist", "--epochs", "1", "--limit", "640", "--batch", "32", "--plan", plan,
                       "--target", target], os.path.join(tmp, "mlp.jsonl"))
    if not recs:
        continue
    h = recs[0]
    engine = target != "cpu"
    check(h.get("header") == 1 and h["model"] == "mlp" and h["data"] == "mnist" and h["plan"] == plan, what + ": header " + str(h))
    check(h["target"] == target.split(":")[0] and h["batch"] == 32 and h["total_steps"] == 20 and h["epochs"] == 1, what + ": header numbers")
    check(h["family"] == ({"m1": "A13", "m5": "A16"}[target[-2:]] if engine else ""), what + ": family " + h["family"])
    check(h["precision"] == ("fp16" if engine else "fp32") and h["optimizer"] == "adam", what + ": precision, optimizer")
    check((h.get("compile_limit") == 119) == engine, what + ": the compile budget is named for engine targets only")
    steps = [r for r in recs if "loss" in r and "step" in r]
    check([r["step"] for r in steps] == [1, 20], what + ": step lines at 1 and 20, not %s" % [r["step"] for r in steps])
    for r in steps:
        for k in STEP_KEYS + ["samples_per_s"] + (["ms_transfer_est", "est_ms_m1", "est_ms_m5"] if engine else []):
            check(k in r and isinstance(r[k], (int, float)) and r[k] >= 0, "%s: step %d field %s" % (what, r["step"], k))
        if not all(k in r for k in STEP_KEYS):
            continue
        parts = r["ms_data"] + r["ms_fwd_bwd"] + r["ms_optimizer"] + r["ms_compile"]
        check(parts <= r["ms_step"] * 1.001 + 0.002, "%s: phases %.4f exceed the step %.4f" % (what, parts, r["ms_step"]))
        check(r["ms_fwd_bwd"] > 0, what + ": forward+backward time measured")
        check((r["ms_optimizer"] == 0) == (plan == "resident"), what + ": optimizer time %g (0 only when inside the step program)" % r["ms_optimizer"])
        check(abs(r["samples_per_s"] * r["ms_step"] / 1000 - 32) < 0.05 * 32 + 0.1, what + ": throughput %g vs ms/step %g" % (r["samples_per_s"], r["ms_step"]))
    last = steps[-1]
    if engine and res:
        check(abs(last["dispatches"] / 20 - res["dispatches_per_step"]) < 1e-3, what + ": dispatches %d over 20 steps vs --json %g" % (last["dispatches"], res["dispatches_per_step"]))
        check(abs(last["bytes_in"] / 20 - res["bytes_in_per_step"]) <= 1, what + ": bytes in")
        check(abs(last["est_ms_m1"] - res["est_ms_m1"]) < 1e-3 and abs(last["est_ms_m5"] - res["est_ms_m5"]) < 1e-3, what + ": estimates")
        # The evaluation program compiles after the last step line: the end line has the total.
        check(recs[-1]["compiles"] == res["programs_compiled"] <= h["compile_limit"] and last["compiles"] <= res["programs_compiled"],
              what + ": compiles %d, end %d, --json %d" % (last["compiles"], recs[-1]["compiles"], res["programs_compiled"]))
        check(steps[0]["dispatches"] < last["dispatches"] and last["engine_flops"] > 0, what + ": totals grow")
    evals = [r for r in recs if "test_acc" in r]
    check(len(evals) == 1 and evals[0]["step"] == 20 and 0 < evals[0]["test_loss"] < 10, what + ": one evaluation with a test loss")
    end = recs[-1]
    check(end.get("end") == 1 and end["steps"] == 20 and res and abs(end["final_test_acc"] - res["test_acc"]) < 1e-4,
          what + ": end line " + str(end))
    # Every line still names where its loss came from (as test_train_cli checks).
    check(all("loss_source" in r for r in recs), what + ": loss_source on every line")

# llama: tokens, perplexity, validation lines.
tok = os.path.join(tmp, "tok.bin")
data = struct.pack("<%dH" % 3000, *[(i * 7 + i // 13) % 40 + 3 for i in range(3000)])
open(tok, "wb").write(data)
model = os.path.join(tmp, "model.bin")
recs, res = train(["llama", "--config", "tiny", "--data", tok, "--val", tok, "--steps", "12", "--batch", "2", "--seq", "16",
                   "--eval-every", "6", "--sample-every", "6", "--seed", "3", "--export", model], os.path.join(tmp, "llama.jsonl"))
if recs:
    h = recs[0]
    check(h.get("header") == 1 and h["model"] == "llama" and h["config"] == "tiny" and h["seq"] == 16 and h["vocab"] == 43,
          "llama header " + str(h))
    steps = [r for r in recs if "loss" in r and "step" in r]
    for r in steps:
        check(abs(r["ppl"] - math.exp(r["loss"])) <= 1e-3 * r["ppl"], "llama ppl %g vs exp(loss %g)" % (r["ppl"], r["loss"]))
        check(abs(r["tokens_per_s"] * r["ms_step"] / 1000 - 32) < 0.05 * 32 + 0.1, "llama tokens/s %g" % r["tokens_per_s"])
    vals = [r for r in recs if "val_loss" in r]
    check([r["step"] for r in vals] == [6, 12] and all(abs(r["val_ppl"] - math.exp(r["val_loss"])) <= 1e-3 * r["val_ppl"] for r in vals),
          "llama validation lines " + str(vals))
    check(recs[-1].get("end") == 1 and res and abs(recs[-1]["final_val_loss"] - res["val_loss"]) < 1e-5, "llama end line")
    # Samples at 6 and 12; the last is what `aneforge generate` makes from the exported
    # model with the same sampler settings and seed (run.c's loop from BOS).
    samples = [r for r in recs if "sample" in r]
    check([r["step"] for r in samples] == [6, 12], "llama sample lines at %s" % [r["step"] for r in samples])
    if samples:
        ids = samples[-1]["sample"].split()
        check(ids and all(0 <= int(i) < 43 for i in ids), "llama sample ids: " + samples[-1]["sample"])
        g = subprocess.run([cli, "generate", "--model", model, "--tokens", "1", "--steps", "64", "--temperature", "0.8",
                            "--top-p", "0.9", "--seed", "3"], capture_output=True, text=True, timeout=60)
        check(g.stdout.split()[1:] == ids, "the last sample %s is generate's %s" % (ids[:8], g.stdout.split()[1:9]))

# --dashboard without a terminal: plain progress, and the default log is written.
r = subprocess.run([cli, "train", "mlp", "--data", "mnist", "--epochs", "1", "--limit", "320", "--dashboard"],
                   capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
check(r.returncode == 0 and "--dashboard needs a terminal" in r.stderr, "--dashboard off a terminal: " + r.stderr[-300:])
log = os.path.join(tmp, "aneforge-mlp.jsonl")
check(os.path.exists(log) and json.loads(open(log).readline()).get("header") == 1, "--dashboard logs to aneforge-mlp.jsonl")
shutil.rmtree(tmp)
finish("check_train_log")
