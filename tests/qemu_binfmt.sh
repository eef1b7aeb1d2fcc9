#!/bin/sh
# For `make test-arm64`: the tests that run the aneforge CLI, scripts and fixtures exec
# the arm64 binaries directly, which needs the kernel to hand them to qemu-aarch64
# (binfmt_misc). Registers it when it is missing and this is root; says what to do if not.
reg=/proc/sys/fs/binfmt_misc
[ -e $reg/qemu-aarch64 ] && exit 0
command -v qemu-aarch64 >/dev/null || { echo "qemu-aarch64 not found: apt-get install -y qemu-user" >&2; exit 1; }
[ -e $reg/register ] || mount -t binfmt_misc binfmt_misc $reg 2>/dev/null
if [ -w $reg/register ]; then
    # ELF, 64-bit, little-endian, executable or shared object, machine 183 (AArch64)
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$(command -v qemu-aarch64)"':' \
        > $reg/register && echo "registered qemu-aarch64 with binfmt_misc" >&2 && exit 0
fi
echo "cannot register qemu-aarch64 with binfmt_misc (needs root, or apt-get install -y binfmt-support" >&2
echo "qemu-user-binfmt): the tests that run the CLI will fail with 'Exec format error'" >&2
exit 0
