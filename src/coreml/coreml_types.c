/* The two dtype numberings a package uses: MIL.proto's DataType (program values) and
 * FeatureTypes.proto's ArrayDataType (the model's input and output features). */
#include "coreml/coreml.h"

static const struct { mil_dtype dt; int proto; } table[] = {
    { MIL_BOOL, 1 },    { MIL_STRING, 2 },  { MIL_FP16, 10 },   { MIL_FP32, 11 },  { MIL_FP64, 12 },
    { MIL_BF16, 13 },   { MIL_INT8, 21 },   { MIL_INT16, 22 },  { MIL_INT32, 23 }, { MIL_INT64, 24 },
    { MIL_INT4, 25 },   { MIL_UINT8, 31 },  { MIL_UINT16, 32 }, { MIL_UINT32, 33 }, { MIL_UINT64, 34 },
    { MIL_UINT4, 35 },  { MIL_UINT2, 36 },  { MIL_UINT1, 37 },  { MIL_UINT6, 38 }, { MIL_UINT3, 39 },
};

int coreml_proto_dtype(mil_dtype dt) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].dt == dt) return table[i].proto;
    return 0;
}

mil_dtype coreml_mil_dtype(int proto) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].proto == proto) return table[i].dt;
    return MIL_DT_NONE;
}

int coreml_array_dtype(mil_dtype dt) {
    switch (dt) {
    case MIL_FP16: return 65552;
    case MIL_FP32: return 65568;
    case MIL_FP64: return 65600;
    case MIL_INT32: return 131104;
    case MIL_INT8: return 131080;
    default: return 0;
    }
}
