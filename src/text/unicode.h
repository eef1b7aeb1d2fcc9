/* Unicode classes the byte-level BPE pre-tokenizers need (\p{L}, \p{N}, \s), and UTF-8
 * decoding that never reads past its input. */
#ifndef AF_TEXT_UNICODE_H
#define AF_TEXT_UNICODE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t lo, hi; } text_range;
extern const text_range text_letters[], text_numbers[];
extern const int text_letters_count, text_numbers_count;

bool text_is_letter(uint32_t cp);
bool text_is_number(uint32_t cp);
/* Unicode's White_Space property (what Oniguruma's \s matches). */
bool text_is_space(uint32_t cp);
/* The code point at s[0..n) and its length in bytes; an invalid sequence is one byte,
 * decoded as U+FFFD (a class nothing special matches). */
uint32_t text_utf8_next(const unsigned char *s, size_t n, int *len);
#endif
