#!/bin/sh
# Every mutex and condition variable in src/ is initialised and destroyed (issue 23,
# item 12: af_model.lock was calloc'ed memory used as a mutex, which is one on glibc
# only). For each pthread_mutex_t / pthread_cond_t that is not a static
# PTHREAD_*_INITIALIZER, the .c file of the file that declares it must hold a
# pthread_*_init and a pthread_*_destroy of a field or variable of that name; and no init's result may be ignored (a bare
# `pthread_mutex_init(...);` statement).
# usage: check_sync_init.sh SOURCE_DIR
src="${1:-.}/src"
fail=0
for kind in mutex cond; do
    # "pthread_mutex_t lock;" in a struct or a local, in X.h or X.c: X.c initialises and
    # destroys it (names such as "lock" recur, so each file answers for its own).
    for f in $(grep -rlE "pthread_${kind}_t[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*;" "$src" --include='*.c' --include='*.h'); do
        impl="${f%.*}.c"
        for name in $(grep -oE "pthread_${kind}_t[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*;" "$f" |
                      sed -E "s/pthread_${kind}_t[[:space:]]+//; s/[[:space:]]*;//" | sort -u); do
            if ! grep -qE "pthread_${kind}_init\([^,]*[>.&]${name}[[:space:]]*," "$impl" 2>/dev/null; then
                echo "check_sync_init: $f: pthread_${kind}_t '$name' is never initialised with pthread_${kind}_init in $impl" >&2
                fail=1
            fi
            if ! grep -qE "pthread_${kind}_destroy\([^)]*[>.&]${name}\)" "$impl" 2>/dev/null; then
                echo "check_sync_init: $f: pthread_${kind}_t '$name' is never destroyed with pthread_${kind}_destroy in $impl" >&2
                fail=1
            fi
        done
    done
    # An init whose result is dropped: a line that starts with the call.
    if grep -rnE "^[[:space:]]*pthread_${kind}_init\(" "$src"; then
        echo "check_sync_init: the lines above ignore pthread_${kind}_init's result; check it and fail cleanly" >&2
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "check_sync_init: every mutex and condition variable is initialised (checked) and destroyed"
exit $fail
