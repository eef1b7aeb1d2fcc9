/* CPU kernels of the rearrange bridge ops on [N, C, H, W]: every output element is one
 * input element, found from its output coordinates (ops.def and aneforge.h give the
 * index laws: PyTorch's channel-major order for pixel_(un)shuffle, TensorFlow's
 * block-major order for the others). */
#include "cpu/kernels.h"
#include "ir/op_cases.h"

void cpu_k_rearrange(const cpu_call *c) {
    const af_tensor *t = c->t;
    af_shape is = t->src[0]->shape, os = t->shape;
    int64_t fy = t->a.kernel[0], fx = t->a.kernel[1], f = fy * fx;
    int64_t IN = is.dim[0], IC = is.dim[1], IH = is.dim[2], IW = is.dim[3];
    int64_t ON = os.dim[0], OC = os.dim[1], OH = os.dim[2], OW = os.dim[3];
    const float *x = c->in[0];
    float *y = c->out;
    (void)IN;
    for (int64_t n = 0; n < ON; n++)
        for (int64_t ch = 0; ch < OC; ch++)
            for (int64_t h = 0; h < OH; h++)
                for (int64_t w = 0; w < OW; w++) {
                    int64_t sn = n, sc = ch, sh = h, sw = w;
                    switch (t->op) {
                    case IR_OP_PIXEL_SHUFFLE: case IR_OP_CHANNEL_TO_SPACE: case IR_OP_BATCH_TO_SPACE: {
                        int64_t i = h % fy, j = w % fx;
                        sh = h / fy;
                        sw = w / fx;
                        if (t->op == IR_OP_PIXEL_SHUFFLE) sc = (ch * fy + i) * fx + j;
                        else if (t->op == IR_OP_CHANNEL_TO_SPACE) sc = (i * fx + j) * OC + ch;
                        else sn = (i * fx + j) * ON + n;
                        break;
                    }
                    case IR_OP_PIXEL_UNSHUFFLE: case IR_OP_SPACE_TO_CHANNEL: case IR_OP_SPACE_TO_BATCH: {
                        /* space to depth or batch: which block (i, j) this output reads */
                        int64_t blk;
                        if (t->op == IR_OP_PIXEL_UNSHUFFLE) { sc = ch / f; blk = ch % f; }
                        else if (t->op == IR_OP_SPACE_TO_CHANNEL) { sc = ch % IC; blk = ch / IC; }
                        else { sn = n % (ON / f); blk = n / (ON / f); } /* SPACE_TO_BATCH */
                        sh = h * fy + blk / fx;
                        sw = w * fx + blk % fx;
                        break;
                    }
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, REARRANGE, id)
#include "ir/ops.def"
#undef X
                        break; /* another kind's op: never dispatched here */
                    }
                    *y++ = x[((sn * IC + sc) * IH + sh) * IW + sw];
                }
}
