#!/usr/bin/env python3
"""Issue 23, defects 4, 5, 6 and 11 (part), against the built CLI:
- write errors: --log, report -o, mil emit, --json on stdout meet a full disk (/dev/full:
  ENOSPC) or a file size limit (ulimit -f: EFBIG, a real failed write into a regular
  file); each run exits non-zero naming the file and the errno text, and leaves no
  partial file (an older report stays as it was, no temporaries left);
- output paths checked before the first step (train llama, mlp, cnn), and a periodic
  save that fails mid-run (ANEFORGE_TEST_FAIL_SAVE: that save runs under a file size
  limit of 0, so its writes really fail) warns, training goes on, and the last good
  checkpoint stays;
- every JSON writer emits strict JSON (null for a non-finite number), parsed here with
  NaN/Infinity refused; a diverging run warns once and the skip warning blames the
  learning rate, not a loss scale of 1;
- a resumed llama log's header says "resumed":1 and the report shows it; SIGINT during
  a long validation pass stops it between batches; SIGHUP saves as SIGINT does.

usage: check_writes.py AF_CLI SOURCE_DIR"""
import glob, json, os, random, shutil, signal, struct, subprocess, sys, tempfile, time
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_util import check, finish  # noqa: E402

cli, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
tmp = tempfile.mkdtemp(prefix="af_writes_")
os.symlink(os.path.join(src, "tests", "data", "mnist-subset"), os.path.join(tmp, "mnist"))
env = dict(os.environ, ANEFORGE_DATA=tmp)
env.pop("ANEFORGE_TEST_FAIL_SAVE", None)


def strict(text):
    """json.loads that refuses NaN, Infinity and -Infinity (not JSON)."""
    def refuse(c):
        raise ValueError("not JSON: " + c)
    return json.loads(text, parse_constant=refuse)


def run(args, stdout=subprocess.PIPE, extra_env=None, limit_blocks=None):
    """Runs the CLI; with limit_blocks, under `ulimit -f` (writes past it fail with EFBIG)."""
    e = dict(env, **(extra_env or {}))
    cmd = [cli] + args
    if limit_blocks is not None:  # SIGXFSZ ignored, so the write fails instead of the process dying
        cmd = ["sh", "-c", "trap '' XFSZ; ulimit -f %d; exec \"$@\"" % limit_blocks, "sh"] + cmd
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=e, cwd=tmp, timeout=300)


def tokens(path, n, vocab, seed):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.write(struct.pack("<%dH" % n, *[rng.randrange(vocab) for _ in range(n)]))


def leftovers(folder):
    return [p for p in os.listdir(folder) if ".tmp" in p or ".partial" in p or "probe" in p or
            (p == "full" and not os.path.islink(os.path.join(folder, p)))]


tok = os.path.join(tmp, "tok.bin")
val = os.path.join(tmp, "val.bin")
tokens(tok, 4000, 64, 1)
tokens(val, 400000, 64, 2)  # a validation pass of seconds: long enough to interrupt
LLAMA = ["train", "llama", "--config", "tiny", "--data", "tok.bin", "--batch", "2", "--seq", "16", "--threads", "1"]
MLP = ["train", "mlp", "--data", "mnist", "--epochs", "1", "--limit", "256", "--batch", "32", "--threads", "1"]

# ---- 4. write errors
FULL = os.path.exists("/dev/full")  # Linux; elsewhere the ulimit checks below still run
if FULL:  # through a link of our own: a writer that renamed over it would replace the link, not /dev/full
    os.symlink("/dev/full", os.path.join(tmp, "full"))
else:
    print("check_writes: no /dev/full here: its checks are left out (the file size limit checks still run)")
for what, args in [] if not FULL else [("llama", LLAMA + ["--steps", "3"]), ("mlp", MLP), ("cnn", ["train", "cnn"] + MLP[2:])]:
    r = run(args + ["--log", "full"])
    check(r.returncode == 1, "%s --log /dev/full: exit %d (want 1): %s" % (what, r.returncode, r.stderr[-300:]))
    check("writing log full failed: No space left on device" in r.stderr, what + " --log /dev/full: message: " + r.stderr[-300:])
    check(r.stderr.count("writing log") == 1, what + ": the failure is reported once")

good_log = os.path.join(tmp, "good.jsonl")
r = run(LLAMA + ["--steps", "3", "--log", good_log])
check(r.returncode == 0, "llama with a log: " + r.stderr[-300:])
if FULL:
    r = run(["report", good_log, "-o", "full"])
    check(r.returncode == 1 and "cannot write full: No space left on device" in r.stderr, "report -o /dev/full: %d %s" % (r.returncode, r.stderr))
out = os.path.join(tmp, "report.html")
with open(out, "w") as f:
    f.write("old report\n")
r = run(["report", good_log, "-o", "report.html"], limit_blocks=2)  # 1 KB: the page is larger
check(r.returncode == 1 and "cannot write report.html: File too large" in r.stderr, "report under ulimit: %d %s" % (r.returncode, r.stderr))
check(open(out).read() == "old report\n", "a failed report leaves the older file as it was")
check(not leftovers(tmp), "no temporary left by report: %s" % leftovers(tmp))
r = run(["report", good_log, "-o", "report.html"])
check(r.returncode == 0 and open(out).read().startswith("<!DOCTYPE html>"), "report writes when it can: " + r.stderr)

# mil emit writes two files, each whole or not at all: what a failed emit leaves equals a
# complete emission's file byte for byte.
whole = os.path.join(tmp, "whole")
r = run(["mil", "emit", "mlp-step", "--out", "whole"])
check(r.returncode == 0 and os.path.getsize(os.path.join(whole, "model.mil")) > 2048, "mil emit writes when it can: " + r.stderr)
emit = os.path.join(tmp, "emitted")
r = run(["mil", "emit", "mlp-step", "--out", "emitted"], limit_blocks=2)
check(r.returncode == 1 and "writing emitted/model.mil failed: File too large" in r.stderr, "mil emit under ulimit: %d %s" % (r.returncode, r.stderr))
for p in glob.glob(emit + "/**", recursive=True):
    if os.path.isfile(p):
        ref = os.path.join(whole, os.path.relpath(p, emit))
        check(os.path.exists(ref) and open(p, "rb").read() == open(ref, "rb").read(),
              "mil emit left %s (%d bytes), not a whole file, after a failed write" % (p, os.path.getsize(p)))
check(not os.path.exists(os.path.join(emit, "model.mil")), "no model.mil after its write failed")

with open("/dev/full" if FULL else os.devnull, "w") as full:
    for what, args in [] if not FULL else [("ops --json", ["ops", "--json"]), ("train llama --json", LLAMA + ["--steps", "2", "--json"])]:
        r = run(args, stdout=full)
        check(r.returncode == 1 and "writing to standard output failed: No space left on device" in r.stderr,
              "%s > /dev/full: %d %s" % (what, r.returncode, r.stderr[-300:]))

# ---- 5. output paths before the first step
for what, args in [("llama", LLAMA + ["--steps", "300"]), ("mlp", MLP), ("cnn", ["train", "cnn"] + MLP[2:])]:
    flags = [("--save", "/nonexistent/x.ckpt"), ("--log", "/nonexistent/x.jsonl")] + ([("--export", "/nonexistent/x.bin")] if what == "llama" else [])
    for flag, path in flags:
        r = run(args + [flag, path])
        check(r.returncode == 1 and "%s %s cannot be written: folder /nonexistent: No such file or directory" % (flag, path) in r.stderr,
              "%s %s %s: %d %s" % (what, flag, path, r.returncode, r.stderr[-300:]))
        check("training:" not in r.stderr and "step" not in r.stderr, "%s %s: refused before training: %s" % (what, flag, r.stderr[-300:]))
    r = run(args + ["--save", tmp])
    check(r.returncode == 1 and "--save %s cannot be written: it is a directory" % tmp in r.stderr, what + " --save DIR: " + r.stderr[-300:])

# A read-only folder (root writes anyway: checked only for other users).
if os.geteuid() != 0:
    ro = os.path.join(tmp, "ro")
    os.mkdir(ro)
    open(os.path.join(ro, "log.jsonl"), "w").close()
    os.chmod(ro, 0o555)
    r = run(LLAMA + ["--steps", "2", "--log", "ro/log.jsonl"])  # a log grows in place: its folder may be read-only
    check(r.returncode == 0 and os.path.getsize(os.path.join(ro, "log.jsonl")) > 0, "a writable log in a read-only folder: " + r.stderr[-300:])
    r = run(LLAMA + ["--steps", "300", "--save", "ro/x.ckpt"])
    check(r.returncode == 1 and "--save ro/x.ckpt cannot be written: folder ro: Permission denied" in r.stderr, "read-only folder: " + r.stderr[-300:])
    r = run(["report", good_log, "-o", "ro/r.html"])
    check(r.returncode == 1 and "cannot write ro/r.html: Permission denied" in r.stderr, "report into a read-only folder: " + r.stderr[-300:])
    os.chmod(ro, 0o755)
else:
    print("check_writes: running as root: the read-only folder checks are left out (root writes there anyway)")

# A periodic save that fails: warned, training goes on, the next save tries again.
ck = os.path.join(tmp, "run.ckpt")
r = run(LLAMA + ["--steps", "6", "--eval-every", "2", "--save", "run.ckpt", "--json"], extra_env={"ANEFORGE_TEST_FAIL_SAVE": "2"})
check(r.returncode == 0, "llama, save 2 of 3 fails: exit %d: %s" % (r.returncode, r.stderr[-500:]))
check("could not save run.ckpt" in r.stderr and "File too large" in r.stderr and "training goes on" in r.stderr,
      "llama: the failed save is warned: " + r.stderr[-500:])
res = strict(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
check(res.get("steps") == 6, "llama: trained to the end after a failed save: %s" % res)
r = run(LLAMA + ["--steps", "6", "--resume", "run.ckpt", "--json"])
check(r.returncode == 0 and strict(r.stdout.strip().splitlines()[-1])["steps"] == 6, "the last save (step 6) is whole: " + r.stderr[-300:])
# Saves 2 and 3 fail: the checkpoint of save 1 (step 2) stays, the run says so and exits 1.
os.remove(ck)
r = run(LLAMA + ["--steps", "6", "--eval-every", "2", "--save", "run.ckpt"], extra_env={"ANEFORGE_TEST_FAIL_SAVE": "2,3"})
check(r.returncode == 1 and "the last save failed; run.ckpt holds step 2" in r.stderr, "llama, last save fails: %d %s" % (r.returncode, r.stderr[-500:]))
r = run(LLAMA + ["--steps", "2", "--resume", "run.ckpt", "--json"])
check(r.returncode == 0 and strict(r.stdout.strip().splitlines()[-1])["steps"] == 2, "the last good checkpoint (step 2) kept: " + r.stderr[-300:])
check(not leftovers(tmp), "no temporary left by failed saves: %s" % leftovers(tmp))
mck = os.path.join(tmp, "mlp.ckpt")
r = run(MLP[:4] + ["--epochs", "2"] + MLP[6:] + ["--save", "mlp.ckpt", "--json"], extra_env={"ANEFORGE_TEST_FAIL_SAVE": "1"})
check(r.returncode == 0 and "could not save mlp.ckpt" in r.stderr and "training goes on" in r.stderr and os.path.exists(mck),
      "mlp, the first epoch's save fails: %d %s" % (r.returncode, r.stderr[-500:]))

# ---- 6. strict JSON, divergence
r = run(LLAMA + ["--steps", "30", "--lr", "1e8", "--json", "--log", "div.jsonl", "--val", "tok.bin"])
check(r.returncode == 0, "llama at --lr 1e8: " + r.stderr[-300:])
try:
    res = strict(r.stdout.strip().splitlines()[-1])
    check(res["train_loss"] is None and res["val_loss"] is None, "non-finite losses are null: %s" % res)
except ValueError as e:
    check(False, "llama --json is not JSON: %s: %s" % (e, r.stdout[-300:]))
for i, line in enumerate(open(os.path.join(tmp, "div.jsonl"))):
    try:
        strict(line)
    except ValueError as e:
        check(False, "--log line %d is not JSON: %s: %s" % (i + 1, e, line[:200]))
check(r.stderr.count("the loss diverged at step") == 1 and "lower --lr" in r.stderr, "divergence warned once: " + r.stderr[-600:])
check("too large for these gradients" not in r.stderr and "lower it (e.g. to 1)" not in r.stderr,
      "a loss scale of 1 is not blamed: " + r.stderr[-600:])
check("the learning rate" in r.stderr and "the loss scale is not the cause" in r.stderr, "the learning rate is named: " + r.stderr[-600:])
r = run(LLAMA + ["--steps", "20", "--lr", "1e4", "--json"])
check(r.returncode == 0 and r.stderr.count("the loss diverged at step") == 1, "fp32 llama at --lr 1e4 warns: " + r.stderr[-400:])
r = run(LLAMA + ["--steps", "20", "--json"])
check(r.returncode == 0 and "diverged" not in r.stderr, "a sound run does not warn: " + r.stderr[-400:])
r = run(MLP + ["--lr", "1e9", "--json", "--log", "mdiv.jsonl"])
try:
    strict(r.stdout.strip().splitlines()[-1])
    for line in open(os.path.join(tmp, "mdiv.jsonl")):
        strict(line)
except (ValueError, IndexError) as e:
    check(False, "mlp at --lr 1e9: not JSON: %s" % e)
check("the loss diverged at step" in r.stderr, "mlp divergence warned: " + r.stderr[-400:])
r = run(["ops", "--json"])
try:
    check(len(strict(r.stdout)) > 10, "ops --json lists the ops")
except ValueError as e:
    check(False, "ops --json is not JSON: %s" % e)

# ---- 11. resumed header, SIGINT in validation, SIGHUP
rlog = os.path.join(tmp, "resumed.jsonl")
for p in (rlog, ck):
    if os.path.exists(p):
        os.remove(p)
r1 = run(LLAMA + ["--steps", "6", "--stop-after", "3", "--save", "run.ckpt", "--log", "resumed.jsonl"])
r2 = run(LLAMA + ["--steps", "6", "--resume", "run.ckpt", "--log", "resumed.jsonl"])
heads = [strict(l) for l in open(rlog) if '"header"' in l]
check(r1.returncode == 0 and r2.returncode == 0 and [h.get("resumed") for h in heads] == [0, 1],
      "llama headers: resumed %s" % [h.get("resumed") for h in heads])
r = run(["report", "resumed.jsonl", "-o", "resumed.html"])
check(r.returncode == 0 and "resumed.jsonl (resumed)" in open(os.path.join(tmp, "resumed.html")).read(), "the report marks a resumed run")
r = run(["dashboard", "resumed.jsonl", "--once", "--size", "200x30"])
check(r.returncode == 0 and "resumed" in r.stdout.splitlines()[0], "the dashboard's title marks a resumed run: " + r.stdout[:200])


def interrupt(args, log, sig):
    """Starts a run, waits for its first step line in the log, sends sig; (code, stderr, log)."""
    lp = os.path.join(tmp, log)
    if os.path.exists(lp):
        os.remove(lp)
    p = subprocess.Popen([cli] + args + ["--log", log], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    while p.poll() is None and not (os.path.exists(lp) and '"loss"' in open(lp).read()):
        time.sleep(0.02)  # waits for the child; no result depends on how long
    p.send_signal(sig)
    err = p.communicate(timeout=300)[1]
    return p.returncode, err, open(lp).read() if os.path.exists(lp) else ""


for sig, name in [(signal.SIGINT, "SIGINT"), (signal.SIGHUP, "SIGHUP")]:
    if os.path.exists(ck):
        os.remove(ck)
    code, err, text = interrupt(LLAMA + ["--steps", "1000", "--eval-every", "1", "--val", "val.bin", "--save", "run.ckpt"], "sig.jsonl", sig)
    check(code == 130 and "interrupted after step" in err and "saved run.ckpt" in err, "%s: exit %d: %s" % (name, code, err[-300:]))
    check('"val_loss"' not in text, "%s during the validation pass stops it (no val_loss line): %s" % (name, text[-300:]))
    check(os.path.exists(ck), name + ": checkpoint saved")
code, err, _ = interrupt(MLP[:4] + ["--epochs", "50"] + MLP[6:] + ["--save", "mlp.ckpt"], "msig.jsonl", signal.SIGHUP)
check(code == 130 and "saved mlp.ckpt" in err, "mlp SIGHUP: exit %d: %s" % (code, err[-300:]))

shutil.rmtree(tmp, ignore_errors=True)
finish("check_writes")
