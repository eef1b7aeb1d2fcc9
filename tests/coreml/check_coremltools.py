"""ctest coreml_tools: aneforge's Core ML packages against the real coremltools.

1. Import: every model in cases.py is built with coremltools' MIL builder, converted by
   ct.convert to an mlprogram .mlpackage in fp32 and in fp16 compute precision, run by
   `aneforge run` on seeded inputs and compared with its NumPy reference (relative
   error 1e-4 in fp32, 2e-2 in fp16). Prints how many import and run, and which fail.
2. Export: packages `aneforge export --format coreml` writes (the built-in programs, an
   MLP and a CNN trained for a few steps, the llama fixture's stateless forward) load with coremltools.utils.load_spec and
   MLModel(skip_model_load=True); coremltools' own milproto loader reads the program
   back, and its op types and constants equal those of the MIL text aneforge emits for
   the same model (weights read from that text's weight.bin with NumPy).
   Deployment targets: every iOS 15..18 x fp16/fp32 package of the MLP (and as a
   classifier), the CNN, the
   llama, an embedding (gather) and the built-in programs is read back under its own
   opset (so each op is checked against that target's definition), with the target's
   specification version and opset name, the I/O dtypes it allows (iOS 15: fp32, cast
   inside), fp16 or fp32 ops, the iOS 18 package's ops and constants, and the same
   `aneforge run` outputs (the llama: llama2.c's logits).
3. Classifiers and fp32: the MLP exported with --classes 0..9 and --labels FILE has the
   description (predictedFeatureName, predictedProbabilitiesName, output feature kinds)
   coremltools writes for ct.ClassifierConfig, and a classify op with the labels; with
   --precision fp32 its inputs, op outputs and weights are fp32 as with
   compute_precision=FLOAT32, and the weights are the trained fp32 values.
Exits 77 (ctest: SKIPPED) when coremltools or NumPy is missing.
usage: check_coremltools.py ANEFORGE WORKDIR"""
import os
import re
import sys

try:
    import numpy as np
    import coremltools as ct
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load
except ImportError as e:  # pragma: no cover
    print(f"coreml_tools: skipped: {e} (pip install coremltools numpy)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from common import fresh, runner  # noqa: E402

CLI, WORK = sys.argv[1], sys.argv[2]
failures = []
run = runner(CLI)


def all_cases():
    """(name, precision, converted model, inputs, {output name: reference}) for every case."""
    for name, build in cases.cases():
        for prec in ("fp32", "fp16"):
            rs = np.random.RandomState(1234)
            prog, inputs, ref = build(rs)
            yield name, prec, lambda p=prog, q=prec: ct.convert(
                p, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16, skip_model_load=True,
                compute_precision=ct.precision.FLOAT32 if q == "fp32" else ct.precision.FLOAT16), inputs, ref
    try:
        import cases_torch
    except ImportError as e:
        print(f"PyTorch cases: skipped ({e})")
        return
    for name, traced, inputs, ref in cases_torch.cases():
        for prec in ("fp32", "fp16"):
            def conv(t=traced, x=inputs["x"], q=prec):
                return ct.convert(t, inputs=[ct.TensorType(name="x", shape=x.shape)], convert_to="mlprogram",
                                  minimum_deployment_target=ct.target.iOS16, skip_model_load=True,
                                  compute_precision=ct.precision.FLOAT32 if q == "fp32" else ct.precision.FLOAT16)
            yield name, prec, conv, inputs, {None: ref.astype(np.float64)}


def import_cases():
    imported, missing, reexported = 0, {}, 0
    total = 0
    for name, prec, convert, inputs, ref in all_cases():
        total += 1
        pkg = fresh(os.path.join(WORK, f"{name}_{prec}.mlpackage"))
        m = convert()
        m.save(pkg)
        if None in ref:  # PyTorch's outputs are named by the converter
            ref = {m.get_spec().description.output[0].name: ref[None]}
        args = ["run", pkg, "--out", fresh(os.path.join(WORK, f"{name}_{prec}.out")), "--fp32"]
        for k, v in inputs.items():
            f = os.path.join(WORK, f"{name}_{k}.npy")
            np.save(f, v)
            args += ["--in", f"{k}={f}"]
        p = run(*args, ok=False)
        if p.returncode:
            why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"
            op = re.search(r"op '?([a-z_0-9]+)'?", why)
            missing.setdefault(op.group(1) if op else why, []).append(f"{name}_{prec}")
            continue
        tol = 1e-4 if prec == "fp32" else 2e-2
        for k, want in ref.items():
            got = np.load(os.path.join(WORK, f"{name}_{prec}.out", f"{k}.npy")).astype(np.float64)
            err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            if got.shape != want.shape or not err <= tol:
                failures.append(f"import {name} {prec}: {k} differs from its reference (relative {err:.3g} > {tol}, shape {got.shape} vs {want.shape})")
                break
        else:
            imported += 1
            # and written again by aneforge: coremltools reads the result
            again = fresh(os.path.join(WORK, f"{name}_{prec}.again.mlpackage"))
            run("export", "--format", "coreml", "--mil", pkg, "-o", again)
            spec = ct.utils.load_spec(again)
            milproto_load(spec, spec.specificationVersion, os.path.join(again, "Data", "com.apple.CoreML", "weights"))
            reexported += 1
    print(f"import: {imported} of {total} coremltools-made packages import, run and equal NumPy or PyTorch; "
          f"{reexported} exported again and read back by coremltools")
    for why, names in sorted(missing.items()):
        print(f"  not imported ({len(names)}): {why}: {', '.join(names)}")
    if imported < 20:
        failures.append(f"only {imported} packages imported and matched (want at least 20)")
    if missing:
        failures.append(f"{sum(len(v) for v in missing.values())} packages did not import")


def blob_payload(path, offset, dtype, count):
    b = open(path, "rb").read()
    dt = np.frombuffer(b, "<u4", 1, offset + 4)[0]
    size = int(np.frombuffer(b, "<u8", 1, offset + 8)[0])
    data = int(np.frombuffer(b, "<u8", 1, offset + 16)[0])
    assert {1: np.float16, 2: np.float32}[int(dt)] == dtype, (dt, dtype)
    return np.frombuffer(b[data:data + size], dtype, count)


def mil_consts(mil_dir):
    """{name: array} of the consts in aneforge's emitted MIL text (inline or in weight.bin)."""
    text = open(os.path.join(mil_dir, "model.mil")).read()
    ops = re.findall(r"^\s*(?:[^=]+?)\s([A-Za-z_0-9]+) = ([a-z_0-9]+)\(", text, re.M)
    consts = {}
    for m in re.finditer(r"tensor<fp16, \[([0-9, ]*)\]> ([A-Za-z_0-9]+) = const\(\)\[name = string\(\"[^\"]*\"\), val = "
                         r"tensor<fp16, \[[0-9, ]*\]>\(BLOBFILE\(path = string\(\"[^\"]*\"\), offset = uint64\(([0-9]+)\)\)\)\]", text):
        shape = [int(d) for d in m.group(1).split(",")]
        consts[m.group(2)] = blob_payload(os.path.join(mil_dir, "weights", "weight.bin"), int(m.group(3)), np.float16,
                                          int(np.prod(shape))).reshape(shape)
    return [op for _, op in ops], consts


def check_package(pkg, mil_dir, label, version=9):
    spec = ct.utils.load_spec(pkg)
    ct.models.MLModel(pkg, skip_model_load=True)
    if spec.specificationVersion != version or spec.WhichOneof("Type") != "mlProgram":
        failures.append(f"export {label}: spec version {spec.specificationVersion}, type {spec.WhichOneof('Type')}")
        return
    prog = milproto_load(spec, spec.specificationVersion, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
    fn = prog.functions["main"]
    want_ops, want_consts = mil_consts(mil_dir)
    got_ops = [op.op_type for op in fn.operations]
    # coremltools folds every const into the ops that read it: compare the other ops
    if [o for o in got_ops if o != "const"] != [o for o in want_ops if o != "const"]:
        failures.append(f"export {label}: ops {got_ops} != {want_ops}")
    vals = op_consts(fn)
    for name, w in want_consts.items():
        if name not in vals or vals[name].shape != w.shape or not np.array_equal(vals[name].astype(np.float16), w):
            failures.append(f"export {label}: constant {name} differs from aneforge's weight.bin")
    names_in = [i.name for i in spec.description.input]
    names_out = [o.name for o in spec.description.output]
    fin = [i.name for i in fn.inputs.values()] if isinstance(fn.inputs, dict) else list(fn.inputs)
    if sorted(names_in) != sorted(fin):
        failures.append(f"export {label}: inputs {names_in} != program inputs {fin}")
    print(f"export {label}: spec {version}, {len(got_ops)} ops, {len(want_consts)} weights equal, inputs {names_in}, outputs {names_out}")


def export_cases():
    for sample in ("conv", "attention", "mlp-step"):
        mil = fresh(os.path.join(WORK, f"export_{sample}.mil"))
        run("mil", "emit", sample, "--out", mil)
        for ios in (18, 17):
            pkg = fresh(os.path.join(WORK, f"export_{sample}_ios{ios}.mlpackage"))
            run("export", "--format", "coreml", "--sample", sample, "-o", pkg, "--author", "aneforge tests", "--license", "MIT",
                "--ios", str(ios))
            check_package(pkg, mil, f"{sample} (iOS {ios})", ios - 9)
    for model in ("mlp", "cnn"):
        ck = os.path.join(WORK, f"{model}.ckpt")
        if os.path.exists(ck):
            os.remove(ck)
        run("train", model, "--data", "mnist", "--epochs", "1", "--limit", "256", "--batch", "64", "--save", ck)
        pkg = fresh(os.path.join(WORK, f"export_{model}.mlpackage"))
        run("export", "--format", "coreml", "--ckpt", ck, "-o", pkg, "--batch", "2")
        # the package's own program as MIL, emitted back out by a round trip through aneforge
        spec = ct.utils.load_spec(pkg)
        prog = milproto_load(spec, 9, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
        ops = [op.op_type for op in prog.functions["main"].operations]
        shp = [list(i.type.multiArrayType.shape) for i in spec.description.input]
        print(f"export {model} (trained): spec {spec.specificationVersion}, {len(ops)} ops, input {shp}")
        if spec.specificationVersion != 9 or not ops:
            failures.append(f"export {model}: bad package")


def export_llama():
    """The llama fixture's stateless forward: coremltools reads it, aneforge runs it equal
    to llama2.c's logits within fp16."""
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "llama")
    pkg = fresh(os.path.join(WORK, "export_llama.mlpackage"))
    run("export", "--format", "coreml", "--ckpt", os.path.join(fx, "model_a_v0.bin"), "-o", pkg)
    spec = ct.utils.load_spec(pkg)
    ct.models.MLModel(pkg, skip_model_load=True)
    prog = milproto_load(spec, 9, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
    ops = [op.op_type for op in prog.functions["main"].operations]
    tok = os.path.join(WORK, "llama_tokens.npy")
    np.save(tok, np.load(os.path.join(fx, "model_a_tokens.npy")).reshape(1, 16))
    run("run", pkg, "--in", f"input={tok}", "--out", fresh(os.path.join(WORK, "llama.out")), "--fp32")
    got = np.load(os.path.join(WORK, "llama.out", "output.npy")).astype(np.float64).reshape(16, 37)
    want = np.load(os.path.join(fx, "model_a_logits.npy")).astype(np.float64)
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"export llama (model a, 16 tokens): spec {spec.specificationVersion}, {len(ops)} ops "
          f"({', '.join(sorted(set(o for o in ops if o != 'const')))}), logits within {err:.2g} of llama2.c's")
    if err > 2e-2:
        failures.append(f"export llama: logits relative error {err:.3g}, ops {sorted(set(ops))}")


def reference_classifier(labels):
    """How coremltools itself describes an mlprogram classifier (ct.ClassifierConfig) in
    fp32 compute precision: the reference for ours."""
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4))], opset_version=ct.target.iOS18)
    def prog(x):
        return mb.softmax(x=mb.linear(x=x, weight=np.ones((len(labels), 4), np.float32)), axis=-1)
    return ct.convert(prog, convert_to="mlprogram", classifier_config=ct.ClassifierConfig(labels), skip_model_load=True,
                      minimum_deployment_target=ct.target.iOS18, compute_precision=ct.precision.FLOAT32).get_spec()


def feature_kind(f):
    t = f.type.WhichOneof("Type")
    return (t, f.type.dictionaryType.WhichOneof("KeyType")) if t == "dictionaryType" else (t,)


def export_classifier_fp32():
    """A trained MLP exported as a classifier (integer labels from --classes, strings from
    --labels) and in fp32 compute precision, each against what coremltools writes."""
    ck = os.path.join(WORK, "mlp.ckpt")
    labels_file = os.path.join(WORK, "labels.txt")
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    open(labels_file, "w").write("\n".join(names) + "\n")
    x = os.path.join(WORK, "cls_x.npy")
    np.save(x, np.random.RandomState(3).rand(1, 1, 28, 28).astype(np.float32))
    for how, arg, want_labels in (("--classes", "0..9", list(range(10))), ("--labels", labels_file, names)):
        pkg = fresh(os.path.join(WORK, f"export_cls{how}.mlpackage"))
        run("export", "--format", "coreml", "--ckpt", ck, "-o", pkg, how, arg)
        spec = ct.utils.load_spec(pkg)
        ct.models.MLModel(pkg, skip_model_load=True)
        ref = reference_classifier(want_labels)
        d, rd = spec.description, ref.description
        got = (d.predictedFeatureName, d.predictedProbabilitiesName, [o.name for o in d.output], [feature_kind(o) for o in d.output])
        want = (rd.predictedFeatureName, rd.predictedProbabilitiesName, [o.name for o in rd.output], [feature_kind(o) for o in rd.output])
        if got != want:
            failures.append(f"classifier {how}: description {got} != coremltools' {want}")
        prog = milproto_load(spec, spec.specificationVersion, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
        ops = list(prog.functions["main"].operations)
        cls = [op for op in ops if op.op_type == "classify"]
        classes = list(cls[0].classes.val) if cls else None
        if not cls or [type(want_labels[0])(c) for c in classes] != want_labels or ops[-1].op_type != "classify":
            failures.append(f"classifier {how}: classify op {classes} != labels {want_labels}")
        # aneforge imports a classifier as its probabilities
        run("run", pkg, "--in", f"input={x}", "--out", fresh(os.path.join(WORK, "cls.out")), "--fp32")
        out = [f for f in os.listdir(os.path.join(WORK, "cls.out")) if f.endswith(".npy")]
        p = np.load(os.path.join(WORK, "cls.out", out[0])) if len(out) == 1 else np.zeros(0)
        if p.shape[-1] != 10 or abs(float(p.sum()) - 1) > 1e-2:
            failures.append(f"classifier {how}: imported, it returns {out} of shape {p.shape} summing to {p.sum()}")
        print(f"export classifier {how} {arg}: {d.predictedFeatureName}/{d.predictedProbabilitiesName} "
              f"{[feature_kind(o) for o in d.output]} as coremltools writes them, classes {classes[:3]}..., "
              f"imported probabilities sum {p.sum():.4f}")
    p16, p32 = (fresh(os.path.join(WORK, f"export_mlp_{q}.mlpackage")) for q in ("fp16", "fp32"))
    run("export", "--format", "coreml", "--ckpt", ck, "-o", p16)
    run("export", "--format", "coreml", "--ckpt", ck, "-o", p32, "--precision", "fp32")
    ref = reference_classifier([0, 1])
    weights = {}
    for q, pkg in (("fp16", p16), ("fp32", p32)):
        spec = ct.utils.load_spec(pkg)
        ct.models.MLModel(pkg, skip_model_load=True)
        prog = milproto_load(spec, spec.specificationVersion, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
        fn = prog.functions["main"]
        from coremltools.converters.mil.mil import types as mtypes
        dts = {mtypes.builtin_to_string(op.outputs[0].dtype) for op in fn.operations
               if op.op_type != "const" and op.outputs[0].dtype is not None}
        ins = [i.type.multiArrayType.dataType for i in spec.description.input]
        want_in = (ref.description.input[0].type.multiArrayType.dataType if q == "fp32" else
                   ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16)
        ws = {}
        for op in fn.operations:
            for v in op.inputs.values():
                for a in (v if isinstance(v, (list, tuple)) else [v]):
                    if getattr(a, "val", None) is not None and np.asarray(a.val).size >= 100:
                        ws[a.name] = np.asarray(a.val)
        weights[q] = ws
        if ins != [want_in] or dts != {q} or not ws or any(w.dtype != (np.float32 if q == "fp32" else np.float16) for w in ws.values()):
            failures.append(f"export mlp {q}: inputs {ins} (want {want_in}), op dtypes {dts}, weight dtypes {[w.dtype for w in ws.values()]}")
    # the fp32 weights are the trained ones: rounded, they are the fp16 package's; not all fp16 values
    same = all(n in weights["fp16"] and np.array_equal(w.astype(np.float16), weights["fp16"][n]) for n, w in weights["fp32"].items())
    finer = any(not np.array_equal(w, w.astype(np.float16).astype(np.float32)) for w in weights["fp32"].values())
    if not same or not finer:
        failures.append(f"export mlp fp32: weights rounded equal the fp16 package's: {same}; finer than fp16: {finer}")
    print(f"export mlp --precision fp32: fp32 inputs as ct's compute_precision=FLOAT32, {len(weights['fp32'])} fp32 weights, "
          f"rounding to the fp16 package's: {same}, finer than fp16: {finer}")


EMBEDDING_MIL = """program(1.3)
{
    func main<ios18>(tensor<fp16, [4]> ids) {
            tensor<fp16, [7, 3]> table = const()[name = string("table"), val = tensor<fp16, [7, 3]>([%s])];
            string idx_dtype = const()[name = string("idx_dtype"), val = string("int32")];
            tensor<int32, [4]> idx = cast(dtype = idx_dtype, x = ids)[name = string("idx")];
            int32 ax = const()[name = string("ax"), val = int32(0)];
            tensor<fp16, [4, 3]> rows = gather(axis = ax, indices = idx, x = table)[name = string("rows")];
        } -> (rows);
}
""" % ", ".join(str(i * 0.25) for i in range(21))


def program_of(pkg):
    spec = ct.utils.load_spec(pkg)
    ct.models.MLModel(pkg, skip_model_load=True)
    # loaded under the package's own opset: every op is checked against that target's definition
    prog = milproto_load(spec, spec.specificationVersion, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
    return spec, prog.functions["main"]


def op_consts(fn):
    """{const name: value} of the constants the ops read (coremltools folds consts into them)."""
    vals = {}
    for op in fn.operations:
        for v in op.inputs.values():
            for x in (v if isinstance(v, (list, tuple)) else [v]):
                if getattr(x, "val", None) is not None and hasattr(x, "name"):
                    vals[x.name] = np.asarray(x.val)
    return vals


def export_targets():
    """Every deployment target (iOS 15..18) x precision for the trained MLP (also as a
    classifier) and CNN, the llama fixture, the built-in programs and an embedding
    (gather): the specification
    version and opset of the target, the program read back under that opset's op
    definitions, op types equal to the iOS 18 package's (plus iOS 15's I/O casts), the
    I/O and op dtypes the target allows, constants equal, and `aneforge run` outputs
    equal to the iOS 18 package's (the llama's: llama2.c's logits)."""
    from coremltools.converters.mil.mil import types as mtypes
    AT = ct.proto.FeatureTypes_pb2.ArrayFeatureType
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "llama")
    emb = os.path.join(WORK, "embedding.mil")
    os.makedirs(emb, exist_ok=True)
    open(os.path.join(emb, "model.mil"), "w").write(EMBEDDING_MIL)
    x = os.path.join(WORK, "targets_x.npy")
    np.save(x, np.random.RandomState(5).rand(2, 1, 28, 28).astype(np.float32))
    x1 = os.path.join(WORK, "targets_x1.npy")
    np.save(x1, np.load(x)[:1])
    tok = os.path.join(WORK, "llama_tokens.npy")
    np.save(tok, np.load(os.path.join(fx, "model_a_tokens.npy")).reshape(1, 16))
    ids = os.path.join(WORK, "emb_ids.npy")
    np.save(ids, np.array([3, 0, 6, 3], np.float32))
    logits = np.load(os.path.join(fx, "model_a_logits.npy")).astype(np.float64)
    sources = {
        "mlp": (["--ckpt", os.path.join(WORK, "mlp.ckpt"), "--batch", "2"], f"input={x}"),
        "cnn": (["--ckpt", os.path.join(WORK, "cnn.ckpt"), "--batch", "2"], f"input={x}"),
        "llama": (["--ckpt", os.path.join(fx, "model_a_v0.bin")], f"input={tok}"),
        "embedding": (["--mil", os.path.join(emb, "model.mil")], f"ids={ids}"),
        "classifier": (["--ckpt", os.path.join(WORK, "mlp.ckpt"), "--classes", "0..9"], f"input={x1}"),
        "conv": (["--sample", "conv"], None), "attention": (["--sample", "attention"], None),
        "mlp-step": (["--sample", "mlp-step"], None),
    }
    checked = 0
    for name, (src, feed) in sources.items():
        for prec in ("fp16", "fp32"):
            base = None
            for ios in (18, 17, 16, 15):
                label = f"{name} iOS {ios} {prec}"
                pkg = fresh(os.path.join(WORK, f"target_{name}_{ios}_{prec}.mlpackage"))
                run("export", "--format", "coreml", *src, "-o", pkg, "--ios", str(ios), "--precision", prec)
                try:
                    spec, fn = program_of(pkg)
                except Exception as e:  # coremltools refuses what the target's op set does not accept
                    failures.append(f"{label}: coremltools cannot read it back: {type(e).__name__}: {e}")
                    continue
                bad = []
                if spec.specificationVersion != ios - 9:
                    bad.append(f"specification version {spec.specificationVersion}, want {ios - 9}")
                if spec.mlProgram.functions["main"].opset != f"CoreML{ios - 10}" or fn.opset_version != ios - 9:
                    bad.append(f"opset {spec.mlProgram.functions['main'].opset}, want CoreML{ios - 10}")
                fp16_io = prec == "fp16" and ios >= 16
                want_io = AT.FLOAT16 if fp16_io else AT.FLOAT32
                io = [f.type.multiArrayType.dataType for f in list(spec.description.input) + list(spec.description.output)
                      if f.type.WhichOneof("Type") == "multiArrayType"]
                if any(d not in (want_io, AT.INT32) for d in io) or want_io not in io:
                    bad.append(f"feature dtypes {io}, want {want_io}")
                ops = [op for op in fn.operations if op.op_type != "const"]
                types = [op.op_type for op in ops]
                floats = {mtypes.builtin_to_string(o.dtype) for op in ops for o in op.outputs
                          if o.dtype is not None and mtypes.is_float(o.dtype)}
                # the casts at the ends: iOS 15's fp32 inputs to fp16 and fp16 results to fp32,
                # a classifier's probabilities to the fp32 that classify reads
                ends = [op for op in ops if op.op_type == "cast" and
                        (op.x.name in fn.inputs or any(op.outputs[0] is o for o in fn.outputs) or
                         any(c.op_type == "classify" for c in op.outputs[0].child_ops))]
                inner = {mtypes.builtin_to_string(o.dtype) for op in ops if op not in ends for o in op.outputs
                         if o.dtype is not None and mtypes.is_float(o.dtype)}
                if inner != {prec} or floats != ({"fp16", "fp32"} if prec == "fp16" and (ios == 15 or name == "classifier")
                                                 else {prec}):
                    bad.append(f"op dtypes {sorted(floats)} (inside {sorted(inner)}), want {prec}")
                consts = op_consts(fn)
                if base is None:
                    nf16 = [sum(f.type.multiArrayType.dataType == AT.FLOAT16 for f in fs)
                            for fs in (spec.description.input, spec.description.output)]
                    base = (types, consts, nf16[0], nf16[1])
                else:
                    want = types_for(base, ios)
                    if types != want:
                        bad.append(f"ops {types} != {want}")
                    for k, v in base[1].items():
                        if re.fullmatch(r"const_[0-9]+", k):  # an inline value coremltools' loader named by a counter
                            k = next((c for c in consts if re.fullmatch(r"const_[0-9]+", c) and consts[c].shape == v.shape and
                                      consts[c].dtype == v.dtype and np.array_equal(consts[c], v)), k)
                        w = consts.get(k)
                        if w is None and v.size == 1 or w is not None and v.size == 1 and ios < 17:
                            continue  # scalars: folded differently, or narrowed to x's dtype before iOS 17
                        num = np.issubdtype(v.dtype, np.number) and w is not None and np.issubdtype(w.dtype, np.number)
                        if w is None or w.shape != v.shape or not (np.array_equal(w.astype(np.float64), v.astype(np.float64))
                                                                   if num else np.array_equal(w, v)):
                            bad.append(f"constant {k} differs from the iOS 18 package's")
                            break
                if feed:
                    out = fresh(os.path.join(WORK, f"target_{name}_{ios}_{prec}.out"))
                    run("run", pkg, "--in", feed, "--out", out, "--fp32")
                    got = {f: np.load(os.path.join(out, f)).astype(np.float64) for f in sorted(os.listdir(out)) if f.endswith(".npy")}
                    if name == "llama":
                        y = next(iter(got.values())).reshape(16, 37)
                        err = np.abs(y - logits).max() / np.abs(logits).max()
                        if err > (2e-2 if prec == "fp16" else 1e-4):
                            bad.append(f"logits {err:.3g} from llama2.c's")
                    elif ios == 18:
                        base_out = got
                    elif [v.shape for v in got.values()] != [v.shape for v in base_out.values()] or any(
                            not np.array_equal(a, b) for a, b in zip(got.values(), base_out.values())):
                        bad.append("outputs differ from the iOS 18 package's")
                for b in bad:
                    failures.append(f"export {label}: {b}")
                checked += not bad
    print(f"export targets: {checked} of {len(sources) * 8} packages (iOS 15..18 x fp16/fp32 of {', '.join(sources)}) "
          "read back by coremltools under their own opset with the target's spec version, I/O dtypes, ops and constants")


def types_for(base, ios):
    """The op types a target's package has: the iOS 18 package's, with iOS 15's casts of
    its fp16 inputs first and of its fp16 outputs last."""
    types, _, nin, nout = base
    return ["cast"] * nin + types + ["cast"] * nout if ios == 15 else types


os.makedirs(WORK, exist_ok=True)
try:
    export_cases()
    export_targets()
    export_classifier_fp32()
    export_llama()
    import_cases()
except Exception as e:  # a crash in the tools is a failure, said plainly
    import traceback
    traceback.print_exc()
    failures.append(f"{type(e).__name__}: {e}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
