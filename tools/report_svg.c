#include "report_svg.h"
#include "dash_plot.h"

#include <math.h>
#include <string.h>

void html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c == '\'') fputs("&#39;", f);
        else if (c >= 0x20 || c == '\n' || c == '\t') fputc(c, f);
    }
}

const char *report_color(int i) {
    static const char *const palette[] = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                           "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f" };
    return palette[(i < 0 ? 0 : i) % 10];
}

enum { W = 660, H = 300, ML = 78, MR = 20, MT = 34, MB = 48 };

void svg_chart(FILE *f, const char *title, const char *ylabel, const chart_line *lines, int n) {
    const dash_series *ser[64];
    int m = n < 64 ? n : 64;
    for (int i = 0; i < m; i++) ser[i] = lines[i].s;
    double xlo, xhi, ylo, yhi, xt[16], yt[16];
    if (!dash_range(ser, m, &xlo, &xhi, &ylo, &yhi)) return;
    int nx = dash_ticks(&xlo, &xhi, 7, xt), ny = dash_ticks(&ylo, &yhi, 6, yt);
    const double pw = W - ML - MR, ph = H - MT - MB;
#define PX(v) (ML + ((v) - xlo) / (xhi - xlo) * pw)
#define PY(v) (MT + (yhi - (v)) / (yhi - ylo) * ph)
    fprintf(f, "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "role=\"img\" data-title=\"", W, H, W, H);
    html_escape(f, title);
    fprintf(f, "\">\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H);
    fprintf(f, "<text class=\"title\" x=\"%d\" y=\"20\">", ML);
    html_escape(f, title);
    fputs("</text>\n", f);
    char lab[32];
    for (int i = 0; i < ny; i++) {
        double y = PY(yt[i]);
        dash_fmt(lab, 10, yt[i]);
        fprintf(f, "<line class=\"grid\" x1=\"%d\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\"/>"
                   "<line class=\"ytick\" x1=\"%d\" x2=\"%d\" y1=\"%.2f\" y2=\"%.2f\"/>"
                   "<text class=\"ylabel\" x=\"%d\" y=\"%.2f\">%s</text>\n",
                ML, ML + pw, y, y, ML - 5, ML, y, y, ML - 8, y + 4, lab);
    }
    for (int i = 0; i < nx; i++) {
        double x = PX(xt[i]);
        dash_fmt(lab, 10, xt[i]);
        fprintf(f, "<line class=\"xtick\" x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\"/>"
                   "<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\">%s</text>\n",
                x, x, MT + ph, MT + ph + 5, x, MT + ph + 18, lab);
    }
    fprintf(f, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.2f\"/><line class=\"axis\" x1=\"%d\" x2=\"%.2f\" "
               "y1=\"%.2f\" y2=\"%.2f\"/>\n", ML, ML, MT, MT + ph, ML, ML + pw, MT + ph, MT + ph);
    fprintf(f, "<text class=\"axislabel\" x=\"%.2f\" y=\"%d\">step</text>\n", ML + pw / 2, H - 8);
    fprintf(f, "<text class=\"axislabel\" transform=\"translate(16 %.2f) rotate(-90)\">", MT + ph / 2);
    html_escape(f, ylabel);
    fputs("</text>\n", f);
    for (int k = 0; k < m; k++) {
        const dash_series *s = lines[k].s;
        if (!s || !s->n) continue;
        fprintf(f, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s data-run=\"", lines[k].color,
                lines[k].dashed ? " stroke-dasharray=\"6 4\"" : "");
        html_escape(f, lines[k].run);
        fputs("\" data-series=\"", f);
        html_escape(f, lines[k].series);
        fputs("\" points=\"", f);
        int stride = s->n > 4000 ? (s->n + 3999) / 4000 : 1; /* keep big logs' files small */
        for (int i = 0; i < s->n; i += stride) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) continue;
            fprintf(f, "%s%.2f,%.2f", i ? " " : "", PX(s->x[i]), PY(s->y[i]));
        }
        fputs("\"/>\n", f);
    }
    fputs("</svg><figcaption>", f);
    for (int k = 0; k < m; k++) {
        if (!lines[k].s || !lines[k].s->n) continue;
        fprintf(f, "<span class=\"key\"><svg width=\"26\" height=\"10\"><line x1=\"0\" x2=\"26\" y1=\"5\" y2=\"5\" stroke=\"%s\" "
                   "stroke-width=\"3\"%s/></svg>", lines[k].color, lines[k].dashed ? " stroke-dasharray=\"6 4\"" : "");
        html_escape(f, lines[k].run);
        fputs(": ", f);
        html_escape(f, lines[k].series);
        fputs("</span>\n", f);
    }
    fputs("</figcaption></figure>\n", f);
#undef PX
#undef PY
}
