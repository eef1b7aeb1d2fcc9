/* A character grid for the dashboard: cells of one UTF-8 glyph and a colour, drawn into
 * by the panels and written to the terminal in one go (or as plain text for tests and
 * pipes). */
#ifndef AF_TOOLS_DASH_SCREEN_H
#define AF_TOOLS_DASH_SCREEN_H
#include <stdbool.h>
#include <stdio.h>

typedef enum { C_DEFAULT, C_DIM, C_TITLE, C_BLUE, C_ORANGE, C_GREEN, C_RED, C_PURPLE, C_CYAN, C_COUNT } dash_color;

typedef struct {
    char g[5];          /* one glyph, NUL-terminated */
    unsigned char color;
    bool bold;
} dash_cell;

typedef struct {
    int w, h;
    dash_cell *c;
} dash_screen;

int  dash_screen_init(dash_screen *s, int w, int h); /* -1 on no memory */
void dash_screen_free(dash_screen *s);
void dash_screen_clear(dash_screen *s);
/* Writes UTF-8 text from (x, y) clipped to max_w columns (and the screen); control
 * bytes and broken sequences become '?'. Returns the columns written. */
int  dash_put(dash_screen *s, int x, int y, int max_w, dash_color color, bool bold, const char *text);
/* Columns (code points) of UTF-8 text. */
int  dash_cols(const char *text);
/* printf into dash_put. */
int  dash_putf(dash_screen *s, int x, int y, int max_w, dash_color color, bool bold, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
void dash_set(dash_screen *s, int x, int y, const char *glyph, dash_color color);
/* A box with a title in its top edge. */
void dash_box(dash_screen *s, int x, int y, int w, int h, const char *title);
/* The whole grid: ANSI (cursor home, colours) when ansi, else plain lines. */
void dash_screen_write(const dash_screen *s, FILE *f, bool ansi);
#endif
