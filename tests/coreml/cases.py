"""Small models built with coremltools' MIL builder, each with a NumPy reference: the
corpus check_coremltools.py converts to .mlpackage (fp32 and fp16), imports and runs."""
import math

import numpy as np


def _conv2d(x, w, b, stride=1, pad=0):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y + (b.reshape(1, -1, 1, 1) if b is not None else 0)


def _softmax(h):
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _pool(x, k, fn):
    n, c, h, w = x.shape
    return fn(x.reshape(n, c, h // k, k, w // k, k), axis=(3, 5))


def cases():
    """[(name, build(mb, rs) -> (program, inputs {name: array}, reference outputs {name: array}))]"""
    from coremltools.converters.mil import Builder as mb
    import coremltools as ct

    T = ct.target.iOS16
    out = []

    def case(name, shapes, fn, ref):
        def build(rs):
            inputs = {k: rs.randn(*s).astype(np.float32) for k, s in shapes.items()}
            specs = [mb.TensorSpec(shape=s) for s in shapes.values()]

            names = ", ".join(shapes)  # mb.program names the inputs after the parameters
            ns = {"fn": fn}
            exec(f"def prog({names}):\n    return fn({names})\n", ns)
            prog = mb.program(input_specs=specs, opset_version=T)(ns["prog"])
            return prog, inputs, ref(**{k: v.astype(np.float64) for k, v in inputs.items()})
        out.append((name, build))

    rs = np.random.RandomState(7)
    W = rs.randn(8, 6).astype(np.float32) * 0.5
    B = rs.randn(8).astype(np.float32)
    CW = rs.randn(4, 3, 3, 3).astype(np.float32) * 0.3
    CB = rs.randn(4).astype(np.float32)
    G = rs.rand(6).astype(np.float32) + 0.5
    BE = rs.randn(6).astype(np.float32)
    M = rs.randn(3).astype(np.float32)
    V = rs.rand(3).astype(np.float32) + 0.5
    f64 = lambda a: a.astype(np.float64)

    case("linear_relu", {"x": (2, 6)}, lambda x: mb.relu(x=mb.linear(x=x, weight=W, bias=B), name="y"),
         lambda x: {"y": np.maximum(x @ f64(W).T + B, 0)})
    case("matmul_const", {"x": (3, 6)}, lambda x: mb.matmul(x=x, y=W.T.copy(), name="y"), lambda x: {"y": x @ f64(W).T})
    case("matmul_two", {"a": (2, 3, 4), "b": (2, 5, 4)}, lambda a, b: mb.matmul(x=a, y=b, transpose_y=True, name="y"),
         lambda a, b: {"y": a @ b.transpose(0, 2, 1)})
    case("conv_relu", {"x": (1, 3, 8, 8)},
         lambda x: mb.relu(x=mb.conv(x=x, weight=CW, bias=CB, pad_type="custom", pad=[1, 1, 1, 1]), name="y"),
         lambda x: {"y": np.maximum(_conv2d(x, f64(CW), f64(CB), pad=1), 0)})
    case("conv_stride", {"x": (1, 3, 9, 9)}, lambda x: mb.conv(x=x, weight=CW, strides=[2, 2], pad_type="valid", name="y"),
         lambda x: {"y": _conv2d(x, f64(CW), None, stride=2)})
    case("avg_pool", {"x": (1, 2, 8, 8)}, lambda x: mb.avg_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="y"),
         lambda x: {"y": _pool(x, 2, np.mean)})
    case("max_pool", {"x": (1, 2, 8, 8)}, lambda x: mb.max_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="y"),
         lambda x: {"y": _pool(x, 2, np.max)})
    case("softmax", {"x": (3, 10)}, lambda x: mb.softmax(x=x, axis=-1, name="y"),
         lambda x: {"y": _softmax(x)})
    case("add_broadcast", {"x": (4, 8)}, lambda x: mb.add(x=x, y=B, name="y"), lambda x: {"y": x + B})
    case("mul_sub", {"a": (4, 5), "b": (4, 5)}, lambda a, b: mb.sub(x=mb.mul(x=a, y=b), y=a, name="y"), lambda a, b: {"y": a * b - a})
    case("sigmoid", {"x": (4, 5)}, lambda x: mb.sigmoid(x=x, name="y"), lambda x: {"y": 1 / (1 + np.exp(-x))})
    case("tanh", {"x": (4, 5)}, lambda x: mb.tanh(x=x, name="y"), lambda x: {"y": np.tanh(x)})
    case("reduce_mean", {"x": (2, 3, 4)}, lambda x: mb.reduce_mean(x=x, axes=[-1], keep_dims=True, name="y"),
         lambda x: {"y": x.mean(-1, keepdims=True)})
    case("reduce_sum", {"x": (2, 3, 4)}, lambda x: mb.reduce_sum(x=x, axes=[1], keep_dims=False, name="y"), lambda x: {"y": x.sum(1)})
    case("transpose", {"x": (2, 3, 4)}, lambda x: mb.transpose(x=x, perm=[2, 0, 1], name="y"), lambda x: {"y": x.transpose(2, 0, 1)})
    case("reshape", {"x": (2, 3, 4)}, lambda x: mb.reshape(x=x, shape=[6, 4], name="y"), lambda x: {"y": x.reshape(6, 4)})
    case("layer_norm", {"x": (3, 6)}, lambda x: mb.layer_norm(x=x, axes=[-1], gamma=G, beta=BE, epsilon=1e-5, name="y"),
         lambda x: {"y": (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * G + BE})
    case("batch_norm", {"x": (2, 3, 4, 4)}, lambda x: mb.batch_norm(x=x, mean=M, variance=V, epsilon=1e-5, name="y"),
         lambda x: {"y": (x - M.reshape(1, 3, 1, 1)) / np.sqrt(V.reshape(1, 3, 1, 1) + 1e-5)})
    case("silu", {"x": (4, 5)}, lambda x: mb.silu(x=x, name="y"), lambda x: {"y": x / (1 + np.exp(-x))})
    case("gelu_tanh", {"x": (4, 5)}, lambda x: mb.gelu(x=x, mode="TANH_APPROXIMATION", name="y"),
         lambda x: {"y": 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))})
    case("concat", {"a": (2, 3), "b": (2, 4)}, lambda a, b: mb.concat(values=[a, b], axis=1, name="y"),
         lambda a, b: {"y": np.concatenate([a, b], 1)})
    case("exp_sqrt", {"x": (3, 4)}, lambda x: mb.sqrt(x=mb.exp(x=x), name="y"), lambda x: {"y": np.sqrt(np.exp(x))})
    case("real_div", {"a": (3, 4), "b": (3, 4)}, lambda a, b: mb.real_div(x=a, y=mb.add(x=mb.mul(x=b, y=b), y=1.0), name="y"),
         lambda a, b: {"y": a / (b * b + 1)})
    case("leaky_relu", {"x": (3, 4)}, lambda x: mb.leaky_relu(x=x, alpha=0.1, name="y"), lambda x: {"y": np.where(x > 0, x, 0.1 * x)})
    case("clip", {"x": (3, 4)}, lambda x: mb.clip(x=x, alpha=-0.5, beta=0.5, name="y"), lambda x: {"y": np.clip(x, -0.5, 0.5)})
    case("slice", {"x": (4, 6)}, lambda x: mb.slice_by_index(x=x, begin=[1, 2], end=[3, 6], name="y"), lambda x: {"y": x[1:3, 2:6]})
    case("rsqrt_mean", {"x": (2, 8)},
         lambda x: mb.mul(x=x, y=mb.rsqrt(x=mb.add(x=mb.reduce_mean(x=mb.mul(x=x, y=x), axes=[-1], keep_dims=True), y=1e-5)), name="y"),
         lambda x: {"y": x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)})
    case("mlp2", {"x": (2, 6)},
         lambda x: mb.softmax(x=mb.linear(x=mb.relu(x=mb.linear(x=x, weight=W, bias=B)), weight=W2), axis=-1, name="y"),
         lambda x: {"y": _softmax(np.maximum(x @ f64(W).T + B, 0) @ f64(W2).T)})
    return out


W2 = np.random.RandomState(11).randn(5, 8).astype(np.float32) * 0.5
