#include "cli.h"
#include <stdio.h>
int cmd_bench(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "bench: not yet\n"); return 1; }
