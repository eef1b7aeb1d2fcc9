/* The fake daemon's net.plist compiler (netplist_prog.c). */
#ifndef FAKE_ANE_NETPLIST_H
#define FAKE_ANE_NETPLIST_H
#include "mil/mil.h"

#include <stddef.h>
#include <stdint.h>

/* Builds the graph a net.plist program computes into mod (inputs in InputList order as
 * fp16 [N, C, H, W], one output); 0 with a message in err when the document or a unit
 * is refused. */
__attribute__((visibility("hidden"))) int fake_netplist_build(const uint8_t *xml, size_t len, const uint8_t *w0,
                                                              size_t w0_len, const uint8_t *w1, size_t w1_len,
                                                              mil_module *mod, int *out_u8, char *err, size_t errn);
#endif
