#!/usr/bin/env python3
"""`aneforge dashboard` under tmux on the recorded logs in tests/data/runs: the captured
screen shows each panel with the figures the log holds (read here with Python's json):
final train and val loss, accuracy or perplexity, lr, throughput, ms/step by phase, the
engine accounting and the sample; it follows a growing file, starts over when the file
is truncated or replaced, pauses and resumes on p, scrolls the log tail, redraws on a
resize and gives the terminal back on q. Without a terminal it prints plain lines.

usage: check_dashboard.py AF_CLI SOURCE_DIR"""
import json, math, os, re, shutil, signal, subprocess, sys, tempfile, time
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_util import check, finish, records  # noqa: E402

cli, src = sys.argv[1], sys.argv[2]
runs_dir = os.path.join(src, "tests", "data", "runs")
if not shutil.which("tmux"):
    print("check_dashboard: SKIPPED: tmux is not installed (apt-get install tmux)")
    sys.exit(77)  # ctest's SKIP_RETURN_CODE


tmp = tempfile.mkdtemp(prefix="af_dash_")
sock = os.path.join(tmp, "tmux.sock")  # a private tmux server


def tmux(*args):
    return subprocess.run(["tmux", "-S", sock] + list(args), capture_output=True, text=True)


def capture():
    return tmux("capture-pane", "-p", "-t", "t").stdout


def wait_until(pred, timeout=20.0):
    """Polls the screen until pred(screen) holds (a loaded machine redraws late)."""
    end = time.time() + timeout
    while time.time() < end:
        screen = capture()
        if pred(screen):
            return screen
        time.sleep(0.1)
    return capture()


def wait_for(text, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        screen = capture()
        if text in screen:
            return screen
        time.sleep(0.1)
    print("---- screen without %r:\n%s" % (text, capture()))
    return None


def new_session(cmd, w=120, h=40):
    for attempt in range(10):  # a server that is still going away refuses a new session
        r = tmux("new-session", "-d", "-s", "t", "-x", str(w), "-y", str(h), cmd)
        if r.returncode == 0:
            break
        time.sleep(0.3)
    check(r.returncode == 0, "tmux new-session: " + r.stderr)


def start(log, w=120, h=40):
    tmux("kill-server")
    new_session("%s dashboard %s; echo EXITED-$?; sleep 60" % (cli, log), w, h)


def last(recs, key, where=lambda r: True):
    vals = [r[key] for r in recs if key in r and where(r)]
    return vals[-1] if vals else None


def k_fmt(v):  # dash_view.c's fmt_count
    return "%.3gk" % (v / 1e3) if abs(v) >= 1e4 and abs(v) < 1e6 else "%.3gM" % (v / 1e6) if abs(v) < 1e9 else "%.3gG" % (v / 1e9)


# ------------------------------------------------------------------ an engine run, every panel
log = os.path.join(runs_dir, "mlp-ane-sim.jsonl")
recs = records(log)
step = [r for r in recs if "loss" in r and "step" in r][-1]
header = recs[0]
start(log)
screen = wait_for("finished")
check(screen is not None, "the dashboard never showed the finished run")
if screen:
    steps = step["step"]
    want = [
        "step          %d of %d (epoch %d of %d)" % (steps, header["total_steps"], step["epoch"], header["epochs"]),
        "train loss    %.4f" % step["loss"],
        "val loss      %.4f" % last(recs, "test_loss"),
        "accuracy      %.2f%% batch, %.2f%% test" % (100 * step["accuracy"], 100 * last(recs, "test_acc")),
        "lr            %.4g" % step["lr"],
        "samples/s     %s" % k_fmt(step["samples_per_s"]),
        "ms/step by phase: %.3f ms" % step["ms_step"],
        "dispatches    %.2f" % (step["dispatches"] / steps),
        "compiles      %d of %d budget" % (recs[-1]["compiles"], header["compile_limit"]),
        "est. on chip  M1 %.3f ms, M5 %.3f ms" % (step["est_ms_m1"], step["est_ms_m5"]),
        "mlp on mnist · plan device · ane-sim:A13",
        "Log (%d lines)" % len(recs),
    ]
    # "finished" can show before the rest of the frame is drawn: wait for the whole frame
    screen = wait_until(lambda scr: all(t in scr for t in want) and '{"end":1' in scr)
    for text in want:
        check(text in screen, "the screen lacks %r" % text)
    for name, key in [("data", "ms_data"), ("fwd+bwd", "ms_fwd_bwd"), ("optimizer", "ms_optimizer"),
                      ("compile", "ms_compile"), ("transfer est", "ms_transfer_est")]:
        check(re.search(r"│ %s +%.3f " % (re.escape(name), step[key]), screen), "the phase panel lacks %s %.3f" % (name, step[key]))
    # The loss plot's axis spans the logged losses: its top tick is at or above the first loss.
    check("⡇" in screen or "⢸" in screen or "⠁" in screen, "no braille curve drawn")
    check('{"end":1' in screen, "the log tail shows the last line")
    # Scrolling: up moves the tail back one line (the end line leaves the window), End returns.
    tmux("send-keys", "-t", "t", "Up")
    s2 = wait_for("scrolled back")
    check(s2 is not None and '{"end":1' not in s2, "Up scrolls the tail back")
    tmux("send-keys", "-t", "t", "End")
    check(wait_for('{"end":1') is not None, "End returns to the newest line")
    # Resize: boxes follow the new width.
    tmux("resize-window", "-t", "t", "-x", "100", "-y", "30")
    bottom = lambda scr: [l for l in scr.split("\n") if l.startswith("└")]
    rows = bottom(wait_until(lambda scr: bottom(scr) and len(bottom(scr)[-1].rstrip()) == 100))
    check(rows and len(rows[-1].rstrip()) == 100, "after a resize to 100 columns the bottom box is %d wide" % (len(rows[-1].rstrip()) if rows else -1))
    tmux("send-keys", "-t", "t", "q")
    out = wait_for("EXITED-0")
    check(out is not None and "mlp-ane-sim.jsonl: %d log lines, step %d, train loss %.4f" % (len(recs), steps, step["loss"]) in out,
          "q leaves the alternate screen and prints the summary")

# ------------------------------------------------------------------ a language model: perplexity, sample
log = os.path.join(runs_dir, "llama.jsonl")
recs = records(log)
step = [r for r in recs if "loss" in r and "step" in r][-1]
start(log)
screen = wait_for("finished")
if screen:
    sample = last(recs, "sample")
    want = ["perplexity    %.2f train, %.2f val" % (step["ppl"], last(recs, "val_ppl")),
            "val loss      %.4f" % last(recs, "val_loss"), "tokens/s      %s" % k_fmt(step["tokens_per_s"]),
            "Sample (step %d)" % last(recs, "step", lambda r: "sample" in r), sample[:30],
            "compiles      %d (cpu: no budget)" % recs[-1]["compiles"]]
    screen = wait_until(lambda scr: all(t in scr for t in want))
    for text in want:
        check(text in screen, "llama screen lacks %r" % text)
else:
    check(False, "the llama run never showed as finished")

# ------------------------------------------------------------------ following a live file
src_lines = open(os.path.join(runs_dir, "mlp-cpu.jsonl"), encoding="utf-8").read().splitlines(True)
recs = [json.loads(l) for l in src_lines]
steps = [r for r in recs if "loss" in r and "step" in r]
live = os.path.join(tmp, "live.jsonl")
open(live, "w").writelines(src_lines[:6])
start(live)
n5 = [r for r in recs[:6] if "loss" in r and "step" in r][-1]["step"]
check(wait_for("step          %d of" % n5) is not None, "the first lines are shown")
with open(live, "a") as f:
    f.writelines(src_lines[6:12])
n11 = [r for r in recs[:12] if "loss" in r and "step" in r][-1]["step"]
check(wait_for("step          %d of" % n11) is not None, "appended lines arrive")
tmux("send-keys", "-t", "t", "p")
check(wait_for("PAUSED") is not None, "p pauses")
with open(live, "a") as f:
    f.writelines(src_lines[12:])
time.sleep(0.6)
check("step          %d of" % n11 in wait_until(lambda scr: "step          %d of" % n11 in scr, 3),
      "nothing new is read while paused")
tmux("send-keys", "-t", "t", "p")
check(wait_for("step          %d of" % steps[-1]["step"]) is not None, "p resumes and the rest arrives")
# Truncated in place: the run starts over from the file's new contents.
with open(live, "w") as f:
    f.writelines(src_lines[:4])
n3 = [r for r in recs[:4] if "loss" in r and "step" in r][-1]["step"]
check(wait_for("step          %d of" % n3) is not None, "a truncated file is read again from its start")
# Replaced (rotated): a new file under the name is followed.
rot = os.path.join(tmp, "new.jsonl")
open(rot, "w").writelines(src_lines[:8])
os.rename(rot, live)
n7 = [r for r in recs[:8] if "loss" in r and "step" in r][-1]["step"]
check(wait_for("step          %d of" % n7) is not None, "a replaced file is followed")
check(wait_for("Log (8 lines)") is not None, "the replaced file's lines only")
# Ctrl-Z gives the terminal back (the alternate screen left), SIGCONT takes it again.
shell = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}").stdout.strip() or 0)
kids = open("/proc/%d/task/%d/children" % (shell, shell)).read().split() if shell else []
tmux("send-keys", "-t", "t", "C-z")
check("┌ Now" not in wait_until(lambda scr: "┌ Now" not in scr), "Ctrl-Z leaves the alternate screen")
for pid in [shell] + [int(k) for k in kids]:  # the pane's shell and the dashboard, both started here
    os.kill(pid, signal.SIGCONT)
check(wait_for("┌ Now") is not None, "after SIGCONT the dashboard is back")
tmux("send-keys", "-t", "t", "C-c")
check(wait_for("EXITED-0") is not None, "Ctrl-C ends it cleanly")
tmux("kill-server")

# ------------------------------------------------------------------ train --dashboard, in the training process
data = os.path.join(tmp, "data")
os.mkdir(data)
os.symlink(os.path.join(src, "tests", "data", "mnist-subset"), os.path.join(data, "mnist"))
trained = os.path.join(tmp, "trained.jsonl")
tmux("kill-server")
time.sleep(0.3)
new_session("ANEFORGE_DATA=%s %s train mlp --data mnist --epochs 2 --limit 640 --target ane-sim:m1 --plan device "
            "--log %s --dashboard --json; echo EXITED-$?; sleep 60" % (data, cli, trained))
screen = wait_for("training done: q closes", 60)
if screen is not None:  # the rest of the final frame may still be drawing
    screen = wait_until(lambda scr: "step          20 of 20 (epoch 2 of 2)" in scr and "of 119 budget" in scr)
check(screen is not None and "step          20 of 20 (epoch 2 of 2)" in screen and "of 119 budget" in screen,
      "train --dashboard shows the run to its end")
tmux("send-keys", "-t", "t", "q")
out = wait_for("EXITED-0")
check(out is not None and "trained.jsonl:" in out and '"test_acc":' in out, "q closes it; the summary and --json follow")
trecs = records(trained) if os.path.exists(trained) else []
check(trecs and trecs[0].get("header") == 1 and trecs[-1].get("end") == 1, "train --dashboard wrote the whole log")
tmux("kill-server")
# q while it trains stops it as Ctrl-C does (exit 130, no end line).
os.remove(trained)
time.sleep(0.3)
new_session("ANEFORGE_DATA=%s %s train mlp --data mnist --epochs 500 --limit 640 --log %s --dashboard; "
            "echo EXITED-$?; sleep 60" % (data, cli, trained))
check(wait_for("following", 30) is not None, "train --dashboard follows its log")
tmux("send-keys", "-t", "t", "q")
out = wait_for("EXITED-130", 30)
check(out is not None and "interrupted" in out, "q stops training as Ctrl-C does")
trecs = records(trained) if os.path.exists(trained) else []
check(trecs and trecs[0].get("header") == 1 and not any(r.get("end") for r in trecs), "an interrupted run has no end line")
tmux("kill-server")

# ------------------------------------------------------------------ no terminal: plain lines
r = subprocess.run([cli, "dashboard", os.path.join(runs_dir, "mlp-cpu.jsonl")], capture_output=True, text=True, timeout=20)
out = r.stdout.splitlines()
check(r.returncode == 0 and len(out) == len(src_lines), "plain mode: %d lines for %d" % (len(out), len(src_lines)))
check(out and out[-1].startswith("finished: %d steps" % recs[-1]["steps"]), "plain mode ends with the end line")
check(any(l.startswith("step %d loss %.4f" % (steps[-1]["step"], steps[-1]["loss"])) for l in out), "plain step line")
shutil.rmtree(tmp, ignore_errors=True)
finish("check_dashboard")
