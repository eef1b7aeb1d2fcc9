#include "dash_screen.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int dash_screen_init(dash_screen *s, int w, int h) {
    s->w = w > 0 ? w : 1;
    s->h = h > 0 ? h : 1;
    s->c = calloc((size_t)s->w * (size_t)s->h, sizeof *s->c);
    if (!s->c) return -1;
    dash_screen_clear(s);
    return 0;
}

void dash_screen_free(dash_screen *s) {
    free(s->c);
    s->c = NULL;
}

void dash_screen_clear(dash_screen *s) {
    for (int i = 0; i < s->w * s->h; i++) s->c[i] = (dash_cell){ " ", C_DEFAULT, false };
}

void dash_set(dash_screen *s, int x, int y, const char *glyph, dash_color color) {
    if (x < 0 || y < 0 || x >= s->w || y >= s->h) return;
    dash_cell *c = &s->c[y * s->w + x];
    snprintf(c->g, sizeof c->g, "%s", glyph);
    c->color = (unsigned char)color;
    c->bold = false;
}

/* The byte length of the valid UTF-8 sequence at p, or 0. */
static int utf8_len(const unsigned char *p) {
    int n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

int dash_put(dash_screen *s, int x, int y, int max_w, dash_color color, bool bold, const char *text) {
    int cols = 0;
    const unsigned char *p = (const unsigned char *)text;
    while (p && *p && cols < max_w && x + cols < s->w) {
        int n = utf8_len(p);
        char g[5] = "?";
        if (n && *p >= 0x20 && *p != 0x7f) memcpy(g, p, (size_t)n), g[n] = 0;
        p += n ? n : 1;
        if (y >= 0 && y < s->h && x + cols >= 0) {
            dash_cell *c = &s->c[y * s->w + x + cols];
            memcpy(c->g, g, sizeof g);
            c->color = (unsigned char)color;
            c->bold = bold;
        }
        cols++;
    }
    return cols;
}

int dash_cols(const char *text) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)text; p && *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

int dash_putf(dash_screen *s, int x, int y, int max_w, dash_color color, bool bold, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return dash_put(s, x, y, max_w, color, bold, buf);
}

void dash_box(dash_screen *s, int x, int y, int w, int h, const char *title) {
    if (w < 2 || h < 2) return;
    for (int i = 1; i < w - 1; i++) {
        dash_set(s, x + i, y, "─", C_DIM);
        dash_set(s, x + i, y + h - 1, "─", C_DIM);
    }
    for (int j = 1; j < h - 1; j++) {
        dash_set(s, x, y + j, "│", C_DIM);
        dash_set(s, x + w - 1, y + j, "│", C_DIM);
    }
    dash_set(s, x, y, "┌", C_DIM);
    dash_set(s, x + w - 1, y, "┐", C_DIM);
    dash_set(s, x, y + h - 1, "└", C_DIM);
    dash_set(s, x + w - 1, y + h - 1, "┘", C_DIM);
    if (title && *title) {
        dash_set(s, x + 1, y, " ", C_DIM);
        int n = dash_put(s, x + 2, y, w - 4, C_TITLE, true, title);
        dash_set(s, x + 2 + n, y, " ", C_DIM);
    }
}

static const char *const sgr[C_COUNT] = { "39", "90", "97", "34", "33", "32", "31", "35", "36" };

void dash_screen_write(const dash_screen *s, FILE *f, bool ansi) {
    int color = -1, bold = -1;
    if (ansi) fputs("\033[H", f);
    for (int y = 0; y < s->h; y++) {
        if (ansi) fprintf(f, "\033[%d;1H", y + 1);
        for (int x = 0; x < s->w; x++) {
            const dash_cell *c = &s->c[y * s->w + x];
            if (ansi && (c->color != color || c->bold != bold)) {
                fprintf(f, "\033[0;%s%sm", sgr[c->color < C_COUNT ? c->color : 0], c->bold ? ";1" : "");
                color = c->color;
                bold = c->bold;
            }
            fputs(c->g, f);
        }
        if (!ansi) fputc('\n', f);
    }
    if (ansi) fputs("\033[0m", f);
    fflush(f);
}
