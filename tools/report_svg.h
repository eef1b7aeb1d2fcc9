/* The HTML report's pieces (cmd_report.c): inline SVG line charts with labelled axes,
 * several runs overlaid, and HTML escaping. */
#ifndef AF_TOOLS_REPORT_SVG_H
#define AF_TOOLS_REPORT_SVG_H
#include "dash_run.h"

#include <stdio.h>

/* Text with & < > " ' escaped (and control bytes dropped), for HTML text and attributes. */
void html_escape(FILE *f, const char *s);

typedef struct {
    const dash_series *s;
    const char *run, *series; /* written as data-run / data-series for tools and tests */
    const char *color;
    bool dashed;
} chart_line;

/* One chart: title, y label, lines (x = optimizer step). Nothing when no line has a point. */
void svg_chart(FILE *f, const char *title, const char *ylabel, const chart_line *lines, int n);
/* The report's colour for run i. */
const char *report_color(int i);
#endif
