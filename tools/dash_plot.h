/* Curves for the dashboard (braille dots in a character grid) and the axis ticks the
 * dashboard and the HTML report share. */
#ifndef AF_TOOLS_DASH_PLOT_H
#define AF_TOOLS_DASH_PLOT_H
#include "dash_run.h"
#include "dash_screen.h"

/* The range of the points of n series (non-finite values ignored); false when empty. */
bool dash_range(const dash_series *const *s, int n, double *xlo, double *xhi, double *ylo, double *yhi);
/* Round tick values (1, 2, 5 x 10^k steps) covering [lo, hi], at most max of them;
 * lo and hi widen to the outer ticks. Returns the count (>= 2). */
int dash_ticks(double *lo, double *hi, int max, double *ticks);
/* A value in at most `width` characters: 0.0123, 1.23e+05, 12.3k style kept short. */
void dash_fmt(char *buf, int width, double v);
/* Series in the box (x, y, w, h): labelled y ticks on the left, steps below, one braille
 * line per series in its colour. */
void dash_plot(dash_screen *s, int x, int y, int w, int h, const dash_series *const *ser, const dash_color *colors, int n);
/* A one-row sparkline of the last w values of a series (block glyphs). */
void dash_spark(dash_screen *s, int x, int y, int w, const dash_series *ser, dash_color color);
#endif
