#!/usr/bin/env python3
"""Remakes docs/report.png and docs/dashboard.png (docs/cli.md, "Watching a run") from the
recorded logs in tests/data/runs: the report rendered by headless Chromium, and the
dashboard run under tmux, its captured screen (colours included) written into an HTML
<pre> and rendered the same way. Needs chromium and tmux.

usage: docs/screenshots.py build/aneforge"""
import html, os, re, subprocess, sys, tempfile, time

cli = os.path.abspath(sys.argv[1])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runs = os.path.join(root, "tests", "data", "runs")
tmp = tempfile.mkdtemp(prefix="af_shots_")


def shot(page, png, w, h):
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--screenshot=" + png,
                    "--window-size=%d,%d" % (w, h), "file://" + page], capture_output=True, check=True)
    print(png, os.path.getsize(png), "bytes")


report = os.path.join(tmp, "report.html")
subprocess.run([cli, "report", "--title", "MLP on MNIST: host plan on the CPU against the device plan on ane-sim (M1)",
                "--name", "cpu, host plan", os.path.join(runs, "mlp-cpu.jsonl"),
                "--name", "ane-sim M1, device plan", os.path.join(runs, "mlp-ane-sim.jsonl"), "-o", report], check=True)
shot(report, os.path.join(root, "docs", "report.png"), 1420, 1290)

sock = os.path.join(tmp, "tmux.sock")
subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "d", "-x", "120", "-y", "40",
                "%s dashboard %s; sleep 30" % (cli, os.path.join(runs, "mlp-ane-sim.jsonl"))], check=True)
time.sleep(1.5)
screen = subprocess.run(["tmux", "-S", sock, "capture-pane", "-e", "-p", "-t", "d"], capture_output=True, text=True).stdout
subprocess.run(["tmux", "-S", sock, "kill-server"])

# SGR colours to CSS (the codes dash_screen.c writes).
colours = {"39": "#d0d0d0", "90": "#7a7a7a", "97": "#ffffff", "34": "#5fa8ff", "33": "#ffb74d", "32": "#7fd67f",
           "31": "#ff6b6b", "35": "#d291ff", "36": "#5fd7d7"}
out, fg, bold = [], "#d0d0d0", False
for part in re.split(r"(\x1b\[[0-9;]*m)", screen):
    m = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
    if m:
        for code in (m.group(1) or "0").split(";"):
            if code in ("0", ""):
                fg, bold = "#d0d0d0", False
            elif code == "1":
                bold = True
            elif code in colours:
                fg = colours[code]
        continue
    if part:  # glyphs outside ASCII (braille, blocks) in cells of exactly one column, whatever font draws them
        text = "".join(html.escape(c) if ord(c) < 128 else "<i>%s</i>" % c for c in part)
        out.append('<span style="color:%s%s">%s</span>' % (fg, ";font-weight:bold" if bold else "", text))
page = os.path.join(tmp, "dashboard.html")
open(page, "w").write('<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;background:#1b1d23}'
                      'pre{margin:8px;font:13px/1.2 "DejaVu Sans Mono",monospace;color:#d0d0d0}'
                      'i{font-style:normal;display:inline-block;width:1ch;overflow:visible}</style></head><body><pre>'
                      + "".join(out) + "</pre></body></html>")
shot(page, os.path.join(root, "docs", "dashboard.png"), 980, 660)
