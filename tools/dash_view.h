/* The dashboard's screen for one run (dash_run): title bar, loss and accuracy or
 * perplexity curves, the latest figures with lr and throughput sparklines, ms/step by
 * phase, the engine accounting, the latest sample and the log tail. Pure drawing:
 * the terminal, keys and file following are in dash_term.c. */
#ifndef AF_TOOLS_DASH_VIEW_H
#define AF_TOOLS_DASH_VIEW_H
#include "dash_run.h"
#include "dash_screen.h"

typedef struct {
    int scroll;          /* log tail lines scrolled back from the newest */
    bool paused;
    const char *status;  /* e.g. "following", "finished", "file gone"; may be NULL */
} dash_view_state;

void dash_view_draw(dash_screen *s, const dash_run *r, const dash_view_state *v);
/* The log tail's height on a screen of h rows (for page-wise scrolling). */
int dash_view_tail_rows(int h);
/* A one-line plain summary of a log line for pipes ("step 100 loss 0.3346 ..."); 0 when
 * the line says nothing worth a line. */
int dash_summary(const char *line, size_t n, char *out, size_t cap);
#endif
