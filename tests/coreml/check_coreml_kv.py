"""ctest coreml_kv_tools: the llama's KV-cache package (Core ML states) against coremltools.

1. Export: `aneforge export --format coreml --kv-cache` of the llama fixtures (model a: 4
   query heads over 2 KV heads; model b: 3 layers, --max-seq 8) loads with
   coremltools.utils.load_spec and MLModel(skip_model_load=True): specification version 9,
   inputs input_ids and position, output logits, and the description's states key_cache
   and value_cache (stateType, fp16 arrays [layers, kv_heads, max_seq, head_size]).
   coremltools' milproto loader reads the program back: the two function inputs of state
   type wrapping that shape, two read_state ops whose outputs have it, and two
   coreml_update_state ops (stored as write_state + read_state) writing values of it.
   `--ios 17 --kv-cache` is refused naming iOS 18.
2. Import: a stateful program built with coremltools' own MIL builder (read_state, add,
   coreml_update_state, mul) and converted by ct.convert for iOS 18 is
   run by `aneforge run` (the package holds read_state, add, write_state, read_state,
   mul): its output and the state's value after the call (the extra result named as the
   state) equal NumPy's.
Exits 77 (ctest: SKIPPED) when coremltools or NumPy is missing.
usage: check_coreml_kv.py ANEFORGE WORKDIR"""
import os
import struct
import sys

try:
    import numpy as np
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types
    from coremltools.converters.mil.frontend.milproto.load import load as milproto_load
except ImportError as e:  # pragma: no cover
    print(f"coreml_kv_tools: skipped: {e} (pip install coremltools numpy)")
    sys.exit(77)

CLI, WORK = sys.argv[1], sys.argv[2]
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "llama")
failures = []
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import fresh, runner  # noqa: E402

run = runner(CLI)


def llama_config(path):
    """llama2.c version 0 header: dim, hidden, layers, heads, kv heads, vocab, seq."""
    with open(path, "rb") as f:
        return struct.unpack("<7i", f.read(28))


def export_kv(model, max_seq):
    dim, _, layers, heads, kv_heads, vocab, seq = llama_config(os.path.join(FIX, f"model_{model}_v0.bin"))
    vocab = abs(vocab)
    S = max_seq or seq
    shape = [layers, kv_heads, S, dim // heads]
    pkg = fresh(os.path.join(WORK, f"kv_{model}.mlpackage"))
    args = ["export", "--format", "coreml", "--kv-cache", "--ckpt", os.path.join(FIX, f"model_{model}_v0.bin"), "-o", pkg]
    run(*(args + (["--max-seq", str(max_seq)] if max_seq else [])))
    spec = ct.utils.load_spec(pkg)
    ct.models.MLModel(pkg, skip_model_load=True)
    d = spec.description
    label = f"kv {model}"
    if spec.specificationVersion != 9 or spec.WhichOneof("Type") != "mlProgram":
        failures.append(f"{label}: spec version {spec.specificationVersion}, type {spec.WhichOneof('Type')}")
    ins = sorted(i.name for i in d.input)
    outs = [(o.name, list(o.type.multiArrayType.shape)) for o in d.output]
    states = [(s.name, s.type.WhichOneof("Type"), list(s.type.stateType.arrayType.shape),
               s.type.stateType.arrayType.dataType) for s in d.state]
    fp16 = ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16
    want_states = [(n, "stateType", shape, fp16) for n in ("key_cache", "value_cache")]
    if ins != ["input_ids", "position"] or outs != [("logits", [1, vocab])] or states != want_states:
        failures.append(f"{label}: inputs {ins}, outputs {outs}, states {states} (want {want_states})")
    prog = milproto_load(spec, spec.specificationVersion, os.path.join(pkg, "Data", "com.apple.CoreML", "weights"))
    fn = prog.functions["main"]
    st_inputs = {n: list(v.sym_type.wrapped_type().get_shape()) for n, v in fn.inputs.items() if types.is_state(v.sym_type)}
    reads = [list(op.outputs[0].shape) for op in fn.operations if op.op_type == "read_state"]
    updates = [(op.state.name, list(op.value.shape)) for op in fn.operations if op.op_type == "coreml_update_state"]
    if st_inputs != {"key_cache": shape, "value_cache": shape} or reads != [shape, shape] or \
            sorted(updates) != [("key_cache", shape), ("value_cache", shape)]:
        failures.append(f"{label}: state inputs {st_inputs}, read_state outputs {reads}, coreml_update_state {updates}")
    ops = sorted(set(op.op_type for op in fn.operations) - {"const"})
    print(f"export {label}: spec {spec.specificationVersion}, states {[s[0] for s in states]} {shape} fp16, "
          f"{len(reads)} read_state, {len(updates)} coreml_update_state, ops {ops}")


def refuse_ios17():
    pkg = fresh(os.path.join(WORK, "kv_ios17.mlpackage"))
    p = run("export", "--format", "coreml", "--kv-cache", "--ios", "17", "--ckpt", os.path.join(FIX, "model_a_v0.bin"),
            "-o", pkg, ok=False)
    if p.returncode == 0 or "iOS 18" not in p.stderr or os.path.exists(pkg):
        failures.append(f"--kv-cache --ios 17: exit {p.returncode}, {p.stderr.strip()!r}")
    else:
        print(f"--kv-cache --ios 17 refused: {p.stderr.strip()}")


def import_stateful():
    @mb.program(input_specs=[mb.StateTensorSpec((2, 3), dtype=types.fp16), mb.TensorSpec((2, 3), dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(cache, x):
        s = mb.read_state(input=cache)
        y = mb.add(x=s, y=x)
        t = mb.coreml_update_state(state=cache, value=y)  # stored as write_state, then read_state for t
        return mb.mul(x=t, y=s, name="out")

    pkg = fresh(os.path.join(WORK, "stateful.mlpackage"))
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
    m.save(pkg)
    spec = ct.utils.load_spec(pkg)
    raw = [op.type for op in spec.mlProgram.functions["main"].block_specializations["CoreML8"].operations] \
        if "CoreML8" in spec.mlProgram.functions["main"].block_specializations else []
    rs = np.random.RandomState(27)
    x = rs.uniform(-2, 2, (2, 3)).astype(np.float16)
    c = rs.uniform(-2, 2, (2, 3)).astype(np.float16)
    np.save(os.path.join(WORK, "x.npy"), x)
    np.save(os.path.join(WORK, "cache.npy"), c)
    out = fresh(os.path.join(WORK, "stateful.out"))
    run("run", pkg, "--in", f"x={os.path.join(WORK, 'x.npy')}", "--in", f"cache={os.path.join(WORK, 'cache.npy')}",
        "--out", out)
    y = c.astype(np.float32) + x.astype(np.float32)
    got_out = np.load(os.path.join(out, "out.npy")).astype(np.float32)
    got_state = np.load(os.path.join(out, "cache.npy")).astype(np.float32)
    e1 = float(np.max(np.abs(got_out - y * c)) / np.max(np.abs(y * c)))
    e2 = float(np.max(np.abs(got_state - y)) / np.max(np.abs(y)))
    if raw != ["read_state", "add", "write_state", "read_state", "mul"]:
        failures.append(f"import stateful: coremltools stored ops {raw}; the check expects write_state then read_state")
    if e1 > 2e-2 or e2 > 2e-2:
        failures.append(f"import stateful: out relative error {e1:.3g}, state {e2:.3g}")
    print(f"import coremltools' stateful program (ops {raw}): out within {e1:.2g}, state after the call within {e2:.2g}")


os.makedirs(WORK, exist_ok=True)
try:
    export_kv("a", 0)
    export_kv("b", 8)
    refuse_ios17()
    import_stateful()
except Exception as e:  # a crash in the tools is a failure, said plainly
    import traceback
    traceback.print_exc()
    failures.append(f"{type(e).__name__}: {e}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
