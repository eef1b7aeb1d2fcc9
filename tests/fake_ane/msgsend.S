/* objc_msgSend for the fake framework: a real trampoline, as Apple's is. It saves
 * every argument register (integer and floating point), asks fake_lookup(self, _cmd)
 * for the method's IMP, restores them and tail-jumps to the IMP, so each caller's
 * cast signature reaches the method exactly as a direct call would (stack arguments
 * are untouched). A message to nil jumps to fake_objc_nil_imp, which returns zero in
 * every return register. */
#if defined(__x86_64__)
        .text
        .globl  objc_msgSend
        .type   objc_msgSend, @function
objc_msgSend:
        pushq   %rbp                 /* rsp is now 16-byte aligned */
        movq    %rsp, %rbp
        subq    $192, %rsp
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)       /* al: vector registers used by a variadic call */
        movdqu  %xmm0, 64(%rsp)
        movdqu  %xmm1, 80(%rsp)
        movdqu  %xmm2, 96(%rsp)
        movdqu  %xmm3, 112(%rsp)
        movdqu  %xmm4, 128(%rsp)
        movdqu  %xmm5, 144(%rsp)
        movdqu  %xmm6, 160(%rsp)
        movdqu  %xmm7, 176(%rsp)
        call    fake_lookup          /* (self, _cmd) are already in rdi, rsi */
        movq    %rax, %r11
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movdqu  64(%rsp), %xmm0
        movdqu  80(%rsp), %xmm1
        movdqu  96(%rsp), %xmm2
        movdqu  112(%rsp), %xmm3
        movdqu  128(%rsp), %xmm4
        movdqu  144(%rsp), %xmm5
        movdqu  160(%rsp), %xmm6
        movdqu  176(%rsp), %xmm7
        leave
        jmp     *%r11
        .size   objc_msgSend, .-objc_msgSend

        .globl  fake_objc_nil_imp
        .hidden fake_objc_nil_imp
        .type   fake_objc_nil_imp, @function
fake_objc_nil_imp:
        xorl    %eax, %eax
        xorl    %edx, %edx
        pxor    %xmm0, %xmm0
        pxor    %xmm1, %xmm1
        ret
        .size   fake_objc_nil_imp, .-fake_objc_nil_imp

#elif defined(__aarch64__)
        .text
        .globl  objc_msgSend
        .type   objc_msgSend, %function
objc_msgSend:
        stp     x29, x30, [sp, #-224]!
        mov     x29, sp
        stp     x0, x1, [sp, #16]
        stp     x2, x3, [sp, #32]
        stp     x4, x5, [sp, #48]
        stp     x6, x7, [sp, #64]
        str     x8, [sp, #80]        /* indirect result location */
        stp     q0, q1, [sp, #96]
        stp     q2, q3, [sp, #128]
        stp     q4, q5, [sp, #160]
        stp     q6, q7, [sp, #192]
        bl      fake_lookup          /* (self, _cmd) are already in x0, x1 */
        mov     x16, x0
        ldp     x0, x1, [sp, #16]
        ldp     x2, x3, [sp, #32]
        ldp     x4, x5, [sp, #48]
        ldp     x6, x7, [sp, #64]
        ldr     x8, [sp, #80]
        ldp     q0, q1, [sp, #96]
        ldp     q2, q3, [sp, #128]
        ldp     q4, q5, [sp, #160]
        ldp     q6, q7, [sp, #192]
        ldp     x29, x30, [sp], #224
        br      x16
        .size   objc_msgSend, .-objc_msgSend

        .globl  fake_objc_nil_imp
        .hidden fake_objc_nil_imp
        .type   fake_objc_nil_imp, %function
fake_objc_nil_imp:
        mov     x0, #0
        mov     x1, #0
        movi    d0, #0
        movi    d1, #0
        ret
        .size   fake_objc_nil_imp, .-fake_objc_nil_imp
#else
#error "the fake objc_msgSend has a trampoline for x86-64 and aarch64 only"
#endif

        .section .note.GNU-stack,"",%progbits
