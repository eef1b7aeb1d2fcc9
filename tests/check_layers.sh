#!/bin/sh
# The layers of src/, bottom to top: a file may include headers from its own layer
# and from layers below it, never from above (ARCHITECTURE.md). Fails listing every
# upward include.
root=${1:-.}
layers="ir data text grad nn compile cpu llama engine mil netplist ane sim model train"
rank() { i=0; for l in $layers; do [ "$l" = "$1" ] && { echo $i; return; }; i=$((i+1)); done; echo -1; }
bad=0; checked=0
for dir in $layers; do
    r=$(rank "$dir")
    for f in $(find "$root/src/$dir" -name '*.[ch]'); do
        checked=$((checked+1))
        for inc in $(sed -n 's/^#include "\([a-z_]*\)\/.*/\1/p' "$f" | sort -u); do
            ri=$(rank "$inc")
            if [ "$ri" -lt 0 ]; then echo "$f includes from unknown layer '$inc'"; bad=1
            elif [ "$ri" -gt "$r" ]; then echo "$f ($dir) includes from the layer above: $inc"; bad=1; fi
        done
    done
done
[ "$checked" -gt 50 ] || { echo "only $checked files checked: wrong root?"; exit 1; }
# The library reads no environment variable and writes to no stream: options come from
# the caller, messages go through af_set_log (ARCHITECTURE.md).
loud=$(grep -rnE '\bgetenv *\(|\b(f?printf|puts|fputs|perror|putchar) *\(|\b(stderr|stdout)\b' "$root/src" --include='*.c' --include='*.h' || true)
if [ -n "$loud" ]; then echo "the library reads the environment or prints:"; echo "$loud"; bad=1; fi
[ $bad -eq 0 ] && echo "layers: $checked files, no upward includes, no getenv, no printing"
exit $bad
