#include "dash_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool dash_range(const dash_series *const *s, int n, double *xlo, double *xhi, double *ylo, double *yhi) {
    bool any = false;
    for (int k = 0; k < n; k++)
        for (int i = 0; s[k] && i < s[k]->n; i++) {
            double x = s[k]->x[i], y = s[k]->y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (!any) { *xlo = *xhi = x; *ylo = *yhi = y; any = true; continue; }
            *xlo = x < *xlo ? x : *xlo;
            *xhi = x > *xhi ? x : *xhi;
            *ylo = y < *ylo ? y : *ylo;
            *yhi = y > *yhi ? y : *yhi;
        }
    return any;
}

int dash_ticks(double *lo, double *hi, int max, double *ticks) {
    if (max < 2) max = 2;
    if (!(*hi > *lo)) { /* one value: a unit-sized window around it */
        double pad = *lo != 0 ? fabs(*lo) * 0.05 : 1.0;
        *lo -= pad;
        *hi += pad;
    }
    double raw = (*hi - *lo) / (max - 1), mag = pow(10, floor(log10(raw))), step = mag;
    for (int k = 0; k < 3 && step * (max - 1) < *hi - *lo; k++) step = mag * (k == 0 ? 2 : k == 1 ? 5 : 10);
    while (step * (max - 1) < *hi - *lo - 1e-12 * fabs(*hi)) step *= 2;
    double first = floor(*lo / step + 1e-9) * step, last = ceil(*hi / step - 1e-9) * step;
    int n = 0;
    for (double t = first; t <= last + step * 0.5 && n < max + 1; t += step) ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
    if (n < 2) ticks[n++] = first + step;
    *lo = ticks[0];
    *hi = ticks[n - 1];
    return n;
}

void dash_fmt(char *buf, int width, double v) {
    char tmp[64] = "-";
    if (width < 1) width = 1;
    if (isfinite(v))
        for (int prec = 6; prec >= 1; prec--) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if ((int)strlen(tmp) <= width) break;
            snprintf(tmp, sizeof tmp, "%.0e", v);
        }
    snprintf(buf, (size_t)width + 1, "%s", tmp);
}

static const unsigned char braille_bit[4][2] = { { 0x01, 0x08 }, { 0x02, 0x10 }, { 0x04, 0x20 }, { 0x40, 0x80 } };

typedef struct {
    int w, h; /* cells */
    unsigned char *bits, *color;
} dots;

static void dot(dots *d, int px, int py, dash_color c) {
    if (px < 0 || py < 0 || px >= d->w * 2 || py >= d->h * 4) return;
    int cell = (py / 4) * d->w + px / 2;
    d->bits[cell] |= braille_bit[py % 4][px % 2];
    d->color[cell] = (unsigned char)c;
}

static void line(dots *d, int x0, int y0, int x1, int y1, dash_color c) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (int guard = 0; guard < 100000; guard++) {
        dot(d, x0, y0, c);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

#define LABEL_W 8

void dash_plot(dash_screen *s, int x, int y, int w, int h, const dash_series *const *ser, const dash_color *colors, int n) {
    int pw = w - LABEL_W - 1, ph = h - 1;
    if (pw < 4 || ph < 2) return;
    double xlo, xhi, ylo, yhi;
    if (!dash_range(ser, n, &xlo, &xhi, &ylo, &yhi)) {
        dash_put(s, x + LABEL_W + 2, y + ph / 2, pw - 1, C_DIM, false, "(no data yet)");
        return;
    }
    double ticks[16];
    int nt = dash_ticks(&ylo, &yhi, ph >= 8 ? 5 : ph >= 4 ? 3 : 2, ticks);
    if (!(xhi > xlo)) xhi = xlo + 1;
    int ox = x + LABEL_W + 1;
    /* Axes: ticks on the left edge, steps along the bottom. */
    for (int j = 0; j < ph; j++) dash_set(s, ox - 1, y + j, "│", C_DIM);
    for (int i = 0; i < nt; i++) {
        int row = (int)lround((yhi - ticks[i]) / (yhi - ylo) * (ph - 1));
        char lab[16];
        dash_fmt(lab, LABEL_W - 1, ticks[i]);
        int len = (int)strlen(lab);
        dash_put(s, x + LABEL_W - 1 - len, y + row, len, C_DIM, false, lab);
        dash_set(s, ox - 1, y + row, "┤", C_DIM);
    }
    dash_set(s, ox - 1, y + ph, "└", C_DIM);
    for (int i = 0; i < pw; i++) dash_set(s, ox + i, y + ph, "─", C_DIM);
    char lo[16], hi[16];
    dash_fmt(lo, 10, xlo);
    dash_fmt(hi, 10, xhi);
    dash_putf(s, ox, y + ph, pw, C_DIM, false, " %s", lo);
    dash_putf(s, ox + pw - (int)strlen(hi) - 6, y + ph, pw, C_DIM, false, " step %s", hi);
    dots d = { pw, ph, calloc((size_t)(pw * ph), 1), calloc((size_t)(pw * ph), 1) };
    if (!d.bits || !d.color) { free(d.bits); free(d.color); return; }
    for (int k = 0; k < n; k++) {
        int px0 = 0, py0 = 0;
        bool have = false;
        for (int i = 0; ser[k] && i < ser[k]->n; i++) {
            double vx = ser[k]->x[i], vy = ser[k]->y[i];
            if (!isfinite(vx) || !isfinite(vy)) { have = false; continue; }
            int px = (int)lround((vx - xlo) / (xhi - xlo) * (pw * 2 - 1));
            int py = (int)lround((yhi - vy) / (yhi - ylo) * (ph * 4 - 1));
            if (have) line(&d, px0, py0, px, py, colors[k]);
            else dot(&d, px, py, colors[k]);
            px0 = px, py0 = py, have = true;
        }
    }
    for (int j = 0; j < ph; j++)
        for (int i = 0; i < pw; i++) {
            unsigned b = d.bits[j * pw + i];
            if (!b) continue;
            char g[4] = { (char)0xE2, (char)(0xA0 | b >> 6), (char)(0x80 | (b & 0x3F)), 0 };
            dash_set(s, ox + i, y + j, g, (dash_color)d.color[j * pw + i]);
        }
    free(d.bits);
    free(d.color);
}

void dash_spark(dash_screen *s, int x, int y, int w, const dash_series *ser, dash_color color) {
    static const char *const blocks[8] = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" };
    if (!ser || ser->n == 0 || w < 1) return;
    int first = ser->n > w ? ser->n - w : 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = first; i < ser->n; i++) {
        if (!isfinite(ser->y[i])) continue;
        lo = ser->y[i] < lo ? ser->y[i] : lo;
        hi = ser->y[i] > hi ? ser->y[i] : hi;
    }
    for (int i = first; i < ser->n; i++) {
        if (!isfinite(ser->y[i])) continue;
        int level = hi > lo ? (int)lround((ser->y[i] - lo) / (hi - lo) * 7) : 3;
        dash_set(s, x + i - first, y, blocks[level < 0 ? 0 : level > 7 ? 7 : level], color);
    }
}
