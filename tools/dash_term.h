/* The live dashboard: follows a log file as `tail -f` does (new lines as they arrive,
 * truncation and rotation noticed), owns the terminal (alternate screen, raw keys,
 * restored on exit and on signals, redrawn on resize) and draws dash_view. Used by
 * `aneforge dashboard` and by `aneforge train --dashboard` in the training process. */
#ifndef AF_TOOLS_DASH_TERM_H
#define AF_TOOLS_DASH_TERM_H
#include <stdbool.h>

typedef struct dash_live dash_live;

/* Starts following path (which need not exist yet). On a terminal (stdout a tty) the
 * screen is taken over; otherwise every new line is printed as a plain summary. NULL
 * with a message on failure. */
dash_live *dash_live_start(const char *path, const char *name);
/* Reads new lines, handles keys and signals, redraws (at most about 10 times a second
 * unless forced). Returns true once the user asked to quit (q, Ctrl-C, SIGTERM). */
bool dash_live_poll(dash_live *d, bool force);
/* Whether the log's run has written its end line (and the file is read to its end). */
bool dash_live_finished(const dash_live *d);
/* Whether d draws the full-screen view (else it prints plain summary lines). */
bool dash_live_on_terminal(const dash_live *d);
/* Waits up to ms for a key or a signal (the standalone dashboard's idle loop). */
void dash_live_wait(dash_live *d, int ms);
/* Restores the terminal and frees d; with a terminal, prints the final summary line. */
void dash_live_stop(dash_live *d);
/* `train --dashboard`: starts following log_path when stdin and stdout are a terminal,
 * else says why not on stderr and returns NULL (training goes on with plain progress). */
dash_live *dash_train_start(const char *log_path);
/* After training: shows the final state until q (when the user has not quit already),
 * then restores the terminal. */
void dash_train_finish(dash_live *d, bool quit_already);
#endif
