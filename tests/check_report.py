#!/usr/bin/env python3
"""`aneforge report` on the recorded logs in tests/data/runs: every polyline of the
SVG charts, read back through its axis (the transform recovered from the tick marks
and their labels, then inverted), gives the values logged in the JSON lines (read
here with Python's json, independently of the C reader); the table holds each run's
final figures; log text is escaped and the page fetches nothing; and Chromium's
headless screenshot of the page is non-blank and shows each run's colour.

The screenshot is the ctest case report_html_screenshot (--screenshot: the same checks
and then Chromium's); without Chromium it exits 77, which ctest reports as skipped.

usage: check_report.py AF_CLI SOURCE_DIR [--screenshot]"""
import json, os, re, shutil, struct, subprocess, sys, tempfile, zlib
sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_util import check, finish, records  # noqa: E402
import xml.etree.ElementTree as ET

cli, src = sys.argv[1], sys.argv[2]
screenshot = sys.argv[3:] == ["--screenshot"]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if screenshot and not chromium:
    print("report_html_screenshot: SKIPPED: chromium is not installed (apt-get install chromium)")
    sys.exit(77)
runs_dir = os.path.join(src, "tests", "data", "runs")
logs = ["mlp-cpu.jsonl", "mlp-ane-sim.jsonl", "llama.jsonl"]


# What each chart series is, from the raw records (step lines carry "loss").
def expected(recs, series):
    step_lines = [r for r in recs if "step" in r and "loss" in r]
    eval_lines = [r for r in recs if "step" in r and "loss" not in r and "sample" not in r and "end" not in r]
    key = {"train loss": (step_lines, ["loss"]), "val loss": (eval_lines, ["val_loss", "test_loss"]),
           "train accuracy": (step_lines, ["accuracy"]), "test accuracy": (eval_lines, ["test_acc"]),
           "train perplexity": (step_lines, ["ppl"]), "val perplexity": (eval_lines, ["val_ppl"]),
           "learning rate": (step_lines, ["lr"]), "throughput": (step_lines, ["samples_per_s", "tokens_per_s"])}[series]
    pts = []
    for r in key[0]:
        for k in key[1]:
            if k in r:
                pts.append((r["step"], r[k]))
    return pts


tmp = tempfile.mkdtemp(prefix="af_report_")
html = os.path.join(tmp, "report.html")
args = [cli, "report"]
for name in logs:
    args.append(os.path.join(runs_dir, name))
args += ["-o", html]
rc = subprocess.run(args, capture_output=True, text=True)
check(rc.returncode == 0, "aneforge report failed: " + rc.stderr)
page = open(html, encoding="utf-8").read()

# Self-contained: no scripts, nothing loaded from anywhere.
check("<script" not in page.lower(), "the page has a script")
check(not re.search(r'\b(src|href)\s*=', page), "the page refers to another resource")
check(not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page), "the page names a URL other than the SVG namespace")

svgs = re.findall(r"<svg xmlns=.*?</svg>", page, re.S)
check(len(svgs) >= 5, "%d charts, expected loss, accuracy, perplexity, lr, throughput and phases" % len(svgs))
by_name = {name: records(os.path.join(runs_dir, name)) for name in logs}
lines_checked = 0
for svg in svgs:
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    polys = root.findall(ns + "polyline")
    if not polys:
        continue
    title = root.get("data-title")

    # The axis transform from two ticks: (pixel, labelled value) pairs.
    def axis(kind):
        ticks = [el for el in root.findall(ns + "line") if el.get("class") == kind + "tick"]
        labels = [el for el in root.findall(ns + "text") if el.get("class") == kind + "label"]
        check(len(ticks) >= 2 and len(ticks) == len(labels), "%s: %s ticks and labels" % (title, kind))
        coord = "y1" if kind == "y" else "x1"
        pairs = [(float(t.get(coord)), float(l.text)) for t, l in zip(ticks, labels)]
        (p0, v0), (p1, v1) = pairs[0], pairs[-1]
        for p, v in pairs:  # the ticks themselves lie on one line (positions written to 0.01 px)
            check(abs(p0 + (v - v0) * (p1 - p0) / (v1 - v0) - p) <= 0.011,
                  "%s: %s tick %g at %g is off the axis" % (title, kind, v, p))
        return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0), abs(v1 - v0)

    to_x, xspan = axis("x")
    to_y, yspan = axis("y")
    for pl in polys:
        run, series = pl.get("data-run"), pl.get("data-series")
        pts = [tuple(map(float, p.split(","))) for p in pl.get("points").split()]
        want = expected(by_name[run], series)
        check(len(pts) == len(want), "%s %s: %d points, %d logged" % (run, series, len(pts), len(want)))
        for (px, py), (sx, sy) in zip(pts, want):
            # Coordinates are written to 0.01 px: the tolerance is that over the axis.
            check(abs(to_x(px) - sx) <= xspan * 0.02 / 500 + 1e-9, "%s %s: x %g read back as %g" % (run, series, sx, to_x(px)))
            check(abs(to_y(py) - sy) <= yspan * 0.02 / 200 + 1e-12, "%s %s: %g read back as %g" % (run, series, sy, to_y(py)))
        lines_checked += 1
check(lines_checked >= 12, "only %d curves checked" % lines_checked)

# The table: each run's final figures as logged.
table = page[page.index("<table>"):page.index("</table>")]
rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
check(len(rows) == 3, "3 table rows, not %d" % len(rows))
for name, row in zip(logs, rows):
    recs = by_name[name]
    cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
    header = recs[0]
    last_step = [r for r in recs if "loss" in r and "step" in r][-1]
    check(cells[0] == name and cells[1] == header["model"] and cells[3] == header["plan"], "%s: names %s" % (name, cells[:4]))
    check(cells[10] == "%.4f" % last_step["loss"], "%s: final train loss %s vs %.4f" % (name, cells[10], last_step["loss"]))
    evals = [r for r in recs if "test_acc" in r or "val_loss" in r]
    if "test_acc" in evals[-1]:
        check(cells[12] == "%.2f%%" % (100 * evals[-1]["test_acc"]), "%s: accuracy %s" % (name, cells[12]))
    else:
        check(cells[11] == "%.4f" % evals[-1]["val_loss"], "%s: val loss %s" % (name, cells[11]))
    check(cells[15] == "%.3f" % last_step["ms_step"], "%s: ms/step %s vs %.3f" % (name, cells[15], last_step["ms_step"]))
    if "compile_limit" in header:
        check(cells[19] == "%d of %d" % (recs[-1]["compiles"], header["compile_limit"]), "%s: compiles %s" % (name, cells[19]))
sample = [r["sample"] for r in by_name["llama.jsonl"] if "sample" in r][-1]
check('<pre class="sample">' + sample.replace("&", "&amp;").replace("<", "&lt;") + "</pre>" in page, "the llama sample is shown")

# Hostile text from a log is escaped.
evil = os.path.join(tmp, "evil.jsonl")
with open(evil, "w") as f:
    f.write(json.dumps({"header": 1, "model": "<img src=x onerror=alert(1)>", "plan": "a&b"}) + "\n")
    f.write(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    f.write(json.dumps({"step": 1, "sample": "</pre><script>alert(1)</script>"}) + "\n")
    f.write("{broken\n")
rc = subprocess.run([cli, "report", "--name", "<b>x\"y</b>", evil, "-o", os.path.join(tmp, "evil.html")], capture_output=True)
check(rc.returncode == 0, "report of a hostile log failed")
evil_page = open(os.path.join(tmp, "evil.html"), encoding="utf-8").read()
check("<script" not in evil_page and "<img" not in evil_page and "<b>x" not in evil_page, "log text reaches the page unescaped")
check("&lt;/pre&gt;&lt;script&gt;" in evil_page and "a&amp;b" in evil_page and "&lt;b&gt;x&quot;y" in evil_page, "escaped text present")


# ------------------------------------------------------------------ the screenshot
def png_pixels(path):
    """RGB(A) rows of an 8-bit non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


if not screenshot:
    print("the screenshot part is the ctest case report_html_screenshot")
else:
    shot = os.path.join(tmp, "report.png")
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--screenshot=" + shot, "--window-size=1400,1400", "file://" + html],
                       capture_output=True, text=True, timeout=120)
    check(os.path.exists(shot), "chromium wrote no screenshot: " + r.stderr[-500:])
    if os.path.exists(shot):
        w, h, bpp, rows = png_pixels(shot)
        counts = {}
        for row in rows[::2]:
            for i in range(0, w * bpp, bpp * 2):
                key = bytes(row[i:i + 3])
                counts[key] = counts.get(key, 0) + 1
        total = sum(counts.values())
        check(max(counts.values()) < 0.97 * total and len(counts) > 50, "the screenshot is (nearly) blank")
        for i, colour in enumerate(["1f77b4", "ff7f0e", "2ca02c"]):
            want = bytes.fromhex(colour)
            near = sum(n for k, n in counts.items() if sum(abs(k[j] - want[j]) for j in range(3)) <= 24)
            check(near >= 40, "run %d's colour #%s on %d sampled pixels" % (i, colour, near))
shutil.rmtree(tmp)
finish("check_report")
