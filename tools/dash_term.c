#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* TIOCGWINSZ */
#include "dash_term.h"
#include "cli_args.h"
#include "dash_run.h"
#include "dash_view.h"
#include "aneforge_data.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINE DASH_MAX_LINE /* longer lines are dropped (counted unreadable) */

struct dash_live {
    char path[1024];
    int fd;
    dev_t dev;
    ino_t ino;
    off_t off;
    char *part;        /* a line not yet ended by a newline */
    size_t part_n, part_cap;
    bool part_overflow;
    dash_run run;
    dash_view_state view;
    dash_screen screen;
    bool tty, dirty;
    const char *done_note; /* the status once the run has ended */
    double last_draw, last_read;
};

/* Terminal state, global because the signal handlers restore it. */
static struct termios saved_tio;
static volatile sig_atomic_t term_taken, got_quit, got_winch, got_cont;
static struct sigaction old_act[4];
static const int handled[4] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static const char leave_seq[] = "\033[0m\033[?25h\033[?1049l";

static void restore_terminal(void) {
    if (!term_taken) return;
    term_taken = 0;
    if (write(STDOUT_FILENO, leave_seq, sizeof leave_seq - 1) < 0) { /* nothing more to do */ }
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

static void on_quit(int sig) {
    (void)sig;
    got_quit = 1;
}
static void on_winch(int sig) {
    (void)sig;
    got_winch = 1;
}
/* Ctrl-Z: the terminal back to the shell, then stop; SIGCONT retakes it (in the poll). */
static void on_tstp(int sig) {
    (void)sig;
    int errno_saved = errno;
    restore_terminal();
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    errno = errno_saved;
}
static void on_cont(int sig) {
    (void)sig;
    got_cont = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int take_terminal(void) {
    if (tcgetattr(STDIN_FILENO, &saved_tio)) return -1;
    struct termios raw = saved_tio;
    raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO); /* ISIG kept: Ctrl-C arrives as SIGINT */
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw)) return -1;
    term_taken = 1;
    static bool registered;
    if (!registered) atexit(restore_terminal), registered = true;
    fputs("\033[?1049h\033[?25l\033[2J", stdout);
    fflush(stdout);
    return 0;
}

static void screen_size(int *w, int *h) {
    struct winsize ws;
    *w = 80, *h = 24;
    if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 0 && ws.ws_row > 0) *w = ws.ws_col, *h = ws.ws_row;
}

/* ------------------------------------------------------------------ following the file */

static void reopen(dash_live *d) {
    if (d->fd >= 0) close(d->fd);
    /* Only a regular file: a FIFO would block here, /dev/zero would never end a read. */
    uint64_t size = 0;
    d->fd = af_open_regular(d->path, "log", UINT64_MAX, &size);
    d->off = 0;
    d->part_n = 0;
    d->part_overflow = false;
    struct stat st;
    if (d->fd >= 0 && !fstat(d->fd, &st)) d->dev = st.st_dev, d->ino = st.st_ino;
}

static void take_bytes(dash_live *d, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\n') {
            if (!d->part_overflow) {
                dash_run_feed(&d->run, d->part ? d->part : "", d->part_n);
                if (!d->tty) {
                    char out[1024];
                    if (dash_summary(d->part ? d->part : "", d->part_n, out, sizeof out)) printf("%s\n", out), fflush(stdout);
                }
            } else
                d->run.bad_lines++;
            d->part_n = 0;
            d->part_overflow = false;
            d->dirty = true;
            continue;
        }
        if (d->part_overflow) continue;
        if (d->part_n + 1 >= d->part_cap) {
            size_t cap = d->part_cap ? 2 * d->part_cap : 4096;
            char *p = cap <= MAX_LINE ? realloc(d->part, cap) : NULL;
            if (!p) { d->part_overflow = true; continue; }
            d->part = p;
            d->part_cap = cap;
        }
        d->part[d->part_n++] = b[i];
    }
}

/* New bytes; a shorter file starts the run over, a file replaced under the same name
 * (rotation) is read to its end and then the new one from its start. */
static void read_more(dash_live *d) {
    if (d->fd < 0) {
        reopen(d);
        if (d->fd < 0) { d->view.status = "waiting for the log"; return; }
    }
    struct stat st, by_name;
    if (!fstat(d->fd, &st) && st.st_size < d->off) {
        d->off = 0;
        lseek(d->fd, 0, SEEK_SET);
        d->part_n = 0;
        dash_run_reset(&d->run);
        d->dirty = true;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(d->fd, buf, sizeof buf)) > 0) {
        take_bytes(d, buf, (size_t)n);
        d->off += n;
    }
    bool gone = stat(d->path, &by_name) != 0;
    if (!gone && (by_name.st_ino != d->ino || by_name.st_dev != d->dev)) {
        reopen(d);
        dash_run_reset(&d->run);
        d->dirty = true;
        read_more(d);
        return;
    }
    d->view.status = gone ? "log file gone" : d->run.end.n ? (d->done_note ? d->done_note : "finished") : "following";
}

/* ------------------------------------------------------------------ keys */

static bool handle_keys(dash_live *d) {
    char b[64];
    ssize_t n = read(STDIN_FILENO, b, sizeof b);
    int page = dash_view_tail_rows(d->screen.h) - 2;
    for (ssize_t i = 0; i < n; i++) {
        char c = b[i];
        if (c == 'q' || c == 'Q') return true;
        if (c == 'p' || c == ' ') d->view.paused = !d->view.paused;
        else if (c == 'g') d->view.scroll = DASH_TAIL;
        else if (c == 'G') d->view.scroll = 0;
        else if (c == '\033' && i + 2 < n && (b[i + 1] == '[' || b[i + 1] == 'O')) {
            /* CSI or SS3 keys; Home and End come as H/F, 1~/4~ or 7~/8~ depending on the terminal. */
            char k = b[i + 2];
            int tilde = k >= '1' && k <= '8' && i + 3 < n && b[i + 3] == '~';
            if (k == 'A') d->view.scroll++;
            else if (k == 'B') d->view.scroll--;
            else if (tilde && k == '5') d->view.scroll += page;
            else if (tilde && k == '6') d->view.scroll -= page;
            else if (k == 'H' || (tilde && (k == '1' || k == '7'))) d->view.scroll = DASH_TAIL;
            else if (k == 'F' || (tilde && (k == '4' || k == '8'))) d->view.scroll = 0;
            i += 2 + tilde;
        }
        int64_t most = (d->run.lines < DASH_TAIL ? d->run.lines : DASH_TAIL) - page;
        if (d->view.scroll > most) d->view.scroll = most > 0 ? (int)most : 0;
        if (d->view.scroll < 0) d->view.scroll = 0;
        d->dirty = true;
    }
    return false;
}

static void draw(dash_live *d) {
    int w, h;
    screen_size(&w, &h);
    if (w != d->screen.w || h != d->screen.h || !d->screen.c) {
        dash_screen_free(&d->screen);
        if (dash_screen_init(&d->screen, w, h)) return;
        fputs("\033[2J", stdout);
    }
    dash_view_draw(&d->screen, &d->run, &d->view);
    dash_screen_write(&d->screen, stdout, true);
    d->dirty = false;
    d->last_draw = now_s();
}

/* ------------------------------------------------------------------ the public face */

dash_live *dash_live_start(const char *path, const char *name) {
    dash_live *d = calloc(1, sizeof *d);
    if (!d) { fprintf(stderr, "aneforge dashboard: out of memory\n"); return NULL; }
    snprintf(d->path, sizeof d->path, "%s", path);
    d->fd = -1;
    dash_run_init(&d->run, name);
    d->tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    got_quit = got_winch = 0;
    struct sigaction sa = { 0 };
    sa.sa_handler = on_quit;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaction(handled[i], &sa, &old_act[i]);
    if (d->tty) {
        sa.sa_handler = on_winch;
        sigaction(SIGWINCH, &sa, NULL);
        sa.sa_handler = on_cont;
        sigaction(SIGCONT, &sa, NULL);
        sa.sa_handler = on_tstp;
        sigaction(SIGTSTP, &sa, NULL);
        if (take_terminal()) d->tty = false;
    }
    d->dirty = true;
    return d;
}

bool dash_live_poll(dash_live *d, bool force) {
    double t = now_s();
    if (!d->view.paused && (force || t - d->last_read >= 0.1)) {
        read_more(d);
        d->last_read = t;
    }
    bool quit = got_quit;
    if (d->tty) {
        quit |= handle_keys(d);
        if (got_winch) got_winch = 0, d->dirty = true, dash_screen_free(&d->screen);
        if (got_cont) { /* back from Ctrl-Z */
            got_cont = 0;
            if (!term_taken && !take_terminal()) signal(SIGTSTP, on_tstp);
            d->dirty = true;
            dash_screen_free(&d->screen);
        }
        if (d->dirty && (force || t - d->last_draw >= 0.1)) draw(d);
    }
    return quit;
}

bool dash_live_finished(const dash_live *d) { return d->run.end.n > 0 && d->part_n == 0; }

bool dash_live_on_terminal(const dash_live *d) { return d->tty; }

void dash_live_wait(dash_live *d, int ms) {
    struct pollfd p = { d->tty ? STDIN_FILENO : -1, POLLIN, 0 };
    if (poll(&p, 1, ms) < 0 && errno != EINTR) usleep((useconds_t)ms * 1000);
}

void dash_live_stop(dash_live *d) {
    if (!d) return;
    bool was_tty = d->tty && term_taken;
    restore_terminal();
    for (int i = 0; i < 4; i++) sigaction(handled[i], &old_act[i], NULL);
    if (d->tty) {
        signal(SIGWINCH, SIG_DFL);
        signal(SIGTSTP, SIG_DFL);
        signal(SIGCONT, SIG_DFL);
    }
    if (was_tty) {
        const dash_run *r = &d->run;
        printf("%s: %lld log lines, step %.0f, train loss %.4f", r->name, (long long)r->lines, jl_num(&r->step, "step", 0),
               r->s[DS_LOSS].n ? r->s[DS_LOSS].y[r->s[DS_LOSS].n - 1] : 0.0);
        if (r->s[DS_VAL_LOSS].n) printf(", val loss %.4f", r->s[DS_VAL_LOSS].y[r->s[DS_VAL_LOSS].n - 1]);
        printf("\n");
    }
    if (d->fd >= 0) close(d->fd);
    free(d->part);
    dash_run_free(&d->run);
    dash_screen_free(&d->screen);
    free(d);
}

dash_live *dash_train_start(const char *log_path) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "aneforge train: --dashboard needs a terminal; training with plain progress (watch %s with "
                        "'aneforge dashboard' elsewhere)\n", log_path);
        return NULL;
    }
    return dash_live_start(log_path, cli_base_name(log_path));
}

void dash_train_finish(dash_live *d, bool quit_already) {
    if (!d) return;
    d->done_note = "training done: q closes";
    bool quit = dash_live_poll(d, true) || quit_already;
    while (!quit) {
        dash_live_wait(d, 200);
        quit = dash_live_poll(d, false);
    }
    dash_live_stop(d);
}
