/* Chat templates (aneforge_hf.h): tokenizer_config.json's `chat_template` is Jinja, and
 * rather than a Jinja engine we recognise the families the supported models ship by
 * their markers and render those in C:
 *   ChatML (Qwen2, Qwen2.5, SmolLM2): <|im_start|>role\n...<|im_end|>\n, with the
 *     template's default system prompt when the first message is not a system one;
 *   Qwen3: ChatML whose assistant turns move <think>...</think> around (below);
 *   Llama 3: <|begin_of_text|> then <|start_header_id|>role<|end_header_id|>\n\n
 *     trimmed content <|eot_id|>;
 *   Llama 3.1 / 3.2: the same after a system turn that always comes first, holding the
 *     knowledge cutoff, the date and the system message;
 *   Llama 2: <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] answer </s>.
 * Anything else is refused with its opening, so a raw prompt is used knowingly. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "ir/file.h"
#include "ir/ir.h"
#include "ir/json.h"

#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define CFG_MAX_FILE ((uint64_t)16 << 20)

typedef enum { CHAT_CHATML, CHAT_QWEN3, CHAT_LLAMA3, CHAT_LLAMA31, CHAT_LLAMA2 } chat_family;

struct af_hf_chat {
    chat_family family;
    bool think_prompt;    /* Qwen3 thinking models: the generation prompt opens <think>\n */
    char *default_system; /* ChatML: the system turn when the first message is not one */
    char *bos, *eos;      /* the template's bos_token and eos_token ("" when unset) */
    char *cutoff;         /* Llama 3.1: "Cutting Knowledge Date: December 2023" */
    char *date;           /* Llama 3.1: the template's date_string; NULL: today's (strftime_now) */
};

static const char *const FAMILY_NAME[] = { "chatml", "qwen3", "llama3", "llama3.1", "llama2" };

/* A growing output string. */
typedef struct { char *s; size_t n, cap; bool oom; } sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = true; return; }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Python's str.isspace() for the code point at s (UTF-8), what Jinja's trim and
 * str.strip() remove; its length in bytes, or 0 when it is not whitespace. */
static int space_at(const unsigned char *s, size_t n) {
    if (!n) return 0;
    if (s[0] < 0x80) return (s[0] >= 9 && s[0] <= 13) || (s[0] >= 0x1c && s[0] <= 0x20) ? 1 : 0;
    uint32_t cp;
    int len;
    if ((s[0] & 0xe0) == 0xc0 && n >= 2) cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f), len = 2;
    else if ((s[0] & 0xf0) == 0xe0 && n >= 3) cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f), len = 3;
    else return 0;
    bool sp = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
              cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return sp ? len : 0;
}

/* s[*lo..*hi) without leading / trailing whitespace (ws) or newlines (!ws). */
static void strip(const char *s, size_t *lo, size_t *hi, bool left, bool right, bool ws) {
    const unsigned char *u = (const unsigned char *)s;
    while (left && *lo < *hi) {
        int k = ws ? space_at(u + *lo, *hi - *lo) : u[*lo] == '\n';
        if (!k) break;
        *lo += (size_t)k;
    }
    while (right && *hi > *lo) {
        size_t b = *hi - 1; /* back to the start of the last code point */
        while (b > *lo && (u[b] & 0xc0) == 0x80) b--;
        int k = ws ? space_at(u + b, *hi - b) : u[b] == '\n';
        if (!k || b + (size_t)k != *hi) break;
        *hi = b;
    }
}

static void put_stripped(sbuf *b, const char *s, bool left, bool right, bool ws) {
    size_t lo = 0, hi = strlen(s);
    strip(s, &lo, &hi, left, right, ws);
    put(b, s + lo, hi - lo);
}

/* The first occurrence of needle in hay[0..n), or NULL. */
static const char *find(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (!memcmp(hay + i, needle, k)) return hay + i;
    return NULL;
}

/* ChatML's default system prompt: a string literal in the template that continues
 * "<|im_start|>system\n" with text (not with a closing quote and `+ messages[0]...`),
 * up to "<|im_end|>"; Jinja's escapes undone. NULL when there is none. */
static char *default_system(const char *t, size_t n, bool *oom) {
    static const char open[] = "<|im_start|>system\\n";
    for (const char *p = find(t, n, open); p; p = find(p + 1, n - (size_t)(p + 1 - t), open)) {
        const char *s = p + strlen(open), *e = find(s, n - (size_t)(s - t), "<|im_end|>");
        if (!e || *s == '\'' || *s == '"') continue;
        char *out = malloc((size_t)(e - s) + 1);
        if (!out) { *oom = true; return NULL; }
        size_t k = 0;
        for (const char *q = s; q < e; q++) {
            if (*q == '\\' && q + 1 < e) {
                q++;
                out[k++] = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q;
            } else out[k++] = *q;
        }
        out[k] = 0;
        return out;
    }
    return NULL;
}

void af_hf_chat_free(af_hf_chat *c) {
    if (!c) return;
    free(c->default_system);
    free(c->cutoff);
    free(c->date);
    free(c->bos);
    free(c->eos);
    free(c);
}

af_hf_chat *af_hf_chat_parse(const char *tmpl, const char *bos, const char *eos, const char *what) {
    if (!what) what = "the chat template";
    if (!tmpl) { ir_fail(AF_ERR_INVALID, "%s: no chat template (NULL)", what); return NULL; }
    size_t n = strlen(tmpl);
    af_hf_chat *c = calloc(1, sizeof *c);
    if (!c) { ir_fail(AF_ERR_NOMEM, "%s: out of memory", what); return NULL; }
    bool oom = false;
    if (find(tmpl, n, "<|im_start|>") && find(tmpl, n, "<|im_end|>")) {
        /* Qwen3 splits <think>...</think> off assistant turns (reasoning_content). */
        c->family = find(tmpl, n, "reasoning_content") && find(tmpl, n, "</think>") ? CHAT_QWEN3 : CHAT_CHATML;
        c->think_prompt = c->family == CHAT_QWEN3 && find(tmpl, n, "<|im_start|>assistant\\n<think>\\n'");
        c->default_system = default_system(tmpl, n, &oom);
    } else if (find(tmpl, n, "<|start_header_id|>") && find(tmpl, n, "<|eot_id|>")) {
        const char *cut = find(tmpl, n, "Cutting Knowledge Date: ");
        if (find(tmpl, n, "has_images") || (!cut && find(tmpl, n, "tools"))) {
            ir_fail(AF_ERR_UNSUPPORTED, "%s: a Llama 3-family chat template with %s, which aneforge does not render (it "
                    "renders Llama 3's and Llama 3.1/3.2's text templates): give a raw prompt instead (aneforge generate "
                    "--prompt)", what, find(tmpl, n, "has_images") ? "images (Llama 3.2 Vision)" : "tool definitions");
            af_hf_chat_free(c);
            return NULL;
        }
        c->family = cut ? CHAT_LLAMA31 : CHAT_LLAMA3;
        if (cut) { /* the cutoff as written, up to its \n; the date: today's, or date_string's literal */
            const char *e = cut;
            while (e < tmpl + n && *e != '\\' && *e != '"' && *e != '\'') e++;
            static const char set_date[] = "set date_string = \"";
            const char *ds = find(tmpl, n, set_date), *dv = ds ? ds + strlen(set_date) : NULL;
            const char *de = dv ? strchr(dv, '"') : NULL;
            c->cutoff = strndup(cut, (size_t)(e - cut));
            if (!find(tmpl, n, "strftime_now") && de) c->date = strndup(dv, (size_t)(de - dv));
            else if (!find(tmpl, n, "strftime_now")) {
                ir_fail(AF_ERR_UNSUPPORTED, "%s: a Llama 3.1-style chat template with neither strftime_now nor a "
                        "date_string literal: give a raw prompt instead (aneforge generate --prompt)", what);
                af_hf_chat_free(c);
                return NULL;
            }
            oom |= !c->cutoff || (de && !find(tmpl, n, "strftime_now") && !c->date);
        }
    } else if (find(tmpl, n, "[INST]") && find(tmpl, n, "[/INST]")) {
        c->family = CHAT_LLAMA2;
    } else {
        char head[64];
        size_t k = 0;
        for (size_t i = 0; i < n && k < 48; i++) head[k++] = tmpl[i] == '\n' ? ' ' : tmpl[i];
        head[k] = 0;
        ir_fail(AF_ERR_UNSUPPORTED, "%s: the chat template is not one aneforge recognises (ChatML's <|im_start|>, Llama 3's "
                "<|start_header_id|>, Llama 2's [INST]); it begins \"%s%s\": give a raw prompt instead (aneforge generate "
                "--prompt)", what, head, n > k ? "..." : "");
        af_hf_chat_free(c);
        return NULL;
    }
    if ((c->family == CHAT_LLAMA3 || c->family == CHAT_LLAMA31 || c->family == CHAT_LLAMA2) && (!bos || !*bos)) {
        ir_fail(AF_ERR_CORRUPT, "%s: a %s chat template needs bos_token, which is not set (tokenizer_config.json's "
                "\"bos_token\")", what, c->family == CHAT_LLAMA2 ? "Llama 2" : "Llama 3");
        af_hf_chat_free(c);
        return NULL;
    }
    if (c->family == CHAT_LLAMA2 && (!eos || !*eos)) {
        ir_fail(AF_ERR_CORRUPT, "%s: a Llama 2 chat template needs eos_token, which is not set (tokenizer_config.json's "
                "\"eos_token\")", what);
        af_hf_chat_free(c);
        return NULL;
    }
    c->bos = strdup(bos ? bos : "");
    c->eos = strdup(eos ? eos : "");
    if (oom || !c->bos || !c->eos) {
        ir_fail(AF_ERR_NOMEM, "%s: out of memory", what);
        af_hf_chat_free(c);
        return NULL;
    }
    return c;
}

/* tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}. */
static const char *special(const json_doc *d, const char *key) {
    int i = ir_json_get(d, 0, key);
    if (i >= 0 && d->n[i].type == JSON_OBJ) i = ir_json_get(d, i, "content");
    return i >= 0 && ir_json_is_text(d, i) ? ir_json_str(d, i) : NULL;
}

static char *read_text(const char *path, const char *what, bool *missing) {
    uint64_t size;
    FILE *f = ir_fopen_regular(path, what, CFG_MAX_FILE, &size);
    if (!f) return NULL;
    *missing = false;
    char *buf = malloc((size_t)size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!buf || got != size) { free(buf); ir_fail(AF_ERR_IO, "%s: cannot read it whole", path); return NULL; }
    buf[size] = 0;
    return buf;
}

af_hf_chat *af_hf_chat_load(const char *dir) {
    if (!dir) { ir_fail(AF_ERR_INVALID, "af_hf_chat_load: dir is NULL"); return NULL; }
    size_t dn = strlen(dir) + 32;
    char *cfg = malloc(dn), *jinja = malloc(dn);
    if (!cfg || !jinja) { free(cfg); free(jinja); ir_fail(AF_ERR_NOMEM, "out of memory"); return NULL; }
    snprintf(cfg, dn, "%s/tokenizer_config.json", dir);
    snprintf(jinja, dn, "%s/chat_template.jinja", dir);
    bool missing = true;
    char *text = read_text(cfg, "tokenizer_config.json", &missing), err[256];
    af_hf_chat *c = NULL;
    json_doc *d = NULL;
    if (!text) {
        if (missing) ir_fail(AF_ERR_IO, "%s: no tokenizer_config.json, so no chat template: give a raw prompt instead "
                             "(aneforge generate --prompt)", dir);
        goto done;
    }
    if (!(d = ir_json_parse(text, strlen(text), err, sizeof err))) { ir_fail(AF_ERR_CORRUPT, "%s: %s", cfg, err); goto done; }
    if (d->n[0].type != JSON_OBJ) { ir_fail(AF_ERR_CORRUPT, "%s: not a JSON object", cfg); goto done; }
    /* transformers 4.43+ may write the template beside it, as chat_template.jinja */
    bool jmissing = true;
    char *jt = read_text(jinja, "chat_template.jinja", &jmissing);
    if (!jt && !jmissing) goto done;
    const char *tmpl = jt;
    int t = ir_json_get(d, 0, "chat_template");
    if (!tmpl && t >= 0 && d->n[t].type == JSON_ARR) /* named templates: the "default" one */
        for (int e = d->n[t].child; e >= 0 && !tmpl; e = d->n[e].next) {
            int nm = ir_json_get(d, e, "name"), tt = ir_json_get(d, e, "template");
            if (nm >= 0 && ir_json_is_text(d, nm) && !strcmp(ir_json_str(d, nm), "default") && tt >= 0 && ir_json_is_text(d, tt))
                tmpl = ir_json_str(d, tt);
        }
    else if (!tmpl && t >= 0 && ir_json_is_text(d, t)) tmpl = ir_json_str(d, t);
    if (!tmpl) ir_fail(AF_ERR_UNSUPPORTED, "%s has no chat_template (and there is no chat_template.jinja): the tokenizer "
                       "has no chat format; give a raw prompt instead (aneforge generate --prompt)", cfg);
    else c = af_hf_chat_parse(tmpl, special(d, "bos_token"), special(d, "eos_token"), jt ? jinja : cfg);
    free(jt);
done:
    ir_json_free(d);
    free(text);
    free(cfg);
    free(jinja);
    return c;
}

const char *af_hf_chat_family(const af_hf_chat *c) { return c ? FAMILY_NAME[c->family] : NULL; }

const char *af_hf_chat_end_of_turn(const af_hf_chat *c) {
    if (!c) return NULL;
    return c->family == CHAT_LLAMA3 || c->family == CHAT_LLAMA31 ? "<|eot_id|>" : c->family == CHAT_LLAMA2 ? c->eos : "<|im_end|>";
}

static bool role_is(const af_chat_message *m, const char *r) { return !strcmp(m->role, r); }

/* Qwen3's assistant turn: a <think>...</think> block in the content is split off; it is
 * shown again only for turns after the last user message (the one being answered). */
static void qwen3_assistant(sbuf *b, const char *content, bool after_query, bool last) {
    const char *close = strstr(content, "</think>");
    size_t rlo = 0, rhi = 0;
    const char *reason = "", *body = content;
    if (close) {
        /* reasoning: before the first </think>, newlines off its end, after the last <think>, newlines off its start */
        rhi = (size_t)(close - content);
        strip(content, &rlo, &rhi, false, true, false);
        for (const char *p = content; (p = find(p, rhi - (size_t)(p - content), "<think>")) != NULL; p++)
            rlo = (size_t)(p - content) + 7;
        strip(content, &rlo, &rhi, true, false, false);
        reason = content;
        const char *last_close = close;
        for (const char *p = close; (p = strstr(p + 1, "</think>")) != NULL;) last_close = p;
        body = last_close + 8;
        while (*body == '\n') body++;
    }
    puts_(b, "<|im_start|>assistant\n");
    if (after_query && (last || rhi > rlo)) {
        size_t lo = rlo, hi = rhi;
        strip(reason, &lo, &hi, true, true, false);
        puts_(b, "<think>\n");
        put(b, reason + lo, hi > lo ? hi - lo : 0);
        puts_(b, "\n</think>\n\n");
        put_stripped(b, body, true, false, false);
    } else puts_(b, body);
    puts_(b, "<|im_end|>\n");
}

af_status af_hf_chat_render(const af_hf_chat *c, const af_chat_message *m, int n, int add_generation_prompt, char **text,
                            size_t *len) {
    if (!c || (!m && n) || !text) return ir_fail(AF_ERR_INVALID, "af_hf_chat_render: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    if (n <= 0) return ir_fail(AF_ERR_INVALID, "af_hf_chat_render: no messages (give at least one user message)");
    for (int i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content) return ir_fail(AF_ERR_INVALID, "af_hf_chat_render: message %d has no role or content", i);
        if (!role_is(&m[i], "system") && !role_is(&m[i], "user") && !role_is(&m[i], "assistant"))
            return ir_fail(AF_ERR_UNSUPPORTED, "message %d has role \"%.40s\": aneforge renders system, user and assistant "
                           "messages only", i, m[i].role);
    }
    sbuf b = { 0 };
    bool sys = role_is(&m[0], "system");
    switch (c->family) {
    case CHAT_CHATML:
    case CHAT_QWEN3: {
        if (c->family == CHAT_CHATML && !sys && c->default_system) {
            puts_(&b, "<|im_start|>system\n");
            puts_(&b, c->default_system);
            puts_(&b, "<|im_end|>\n");
        }
        int last_query = n - 1; /* Qwen3: the last user message */
        for (int i = n - 1; i >= 0; i--)
            if (role_is(&m[i], "user")) {
                const char *s = m[i].content;
                size_t k = strlen(s);
                bool tool = k >= 31 && !strncmp(s, "<tool_response>", 15) && !strcmp(s + k - 16, "</tool_response>");
                if (!tool) { last_query = i; break; }
            }
        for (int i = 0; i < n; i++) {
            if (c->family == CHAT_QWEN3 && role_is(&m[i], "assistant")) {
                qwen3_assistant(&b, m[i].content, i > last_query, i == n - 1);
                continue;
            }
            puts_(&b, "<|im_start|>");
            puts_(&b, m[i].role);
            puts_(&b, "\n");
            puts_(&b, m[i].content);
            puts_(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) puts_(&b, c->think_prompt ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n");
        break;
    }
    case CHAT_LLAMA3:
    case CHAT_LLAMA31:
        if (c->family == CHAT_LLAMA31) { /* the system turn always comes first */
            char today[64];
            if (!c->date) { /* strftime_now("%d %b %Y"): the local date, as transformers gives it */
                time_t now = time(NULL);
                struct tm tm;
                if (!localtime_r(&now, &tm) || !strftime(today, sizeof today, "%d %b %Y", &tm)) today[0] = 0;
            }
            puts_(&b, c->bos);
            puts_(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            puts_(&b, c->cutoff);
            puts_(&b, "\nToday Date: ");
            puts_(&b, c->date ? c->date : today);
            puts_(&b, "\n\n");
            if (sys) put_stripped(&b, m[0].content, true, true, true);
            puts_(&b, "<|eot_id|>");
        }
        for (int i = c->family == CHAT_LLAMA31 && sys; i < n; i++) {
            if (!i && c->family == CHAT_LLAMA3) puts_(&b, c->bos);
            puts_(&b, "<|start_header_id|>");
            puts_(&b, m[i].role);
            puts_(&b, "<|end_header_id|>\n\n");
            put_stripped(&b, m[i].content, true, true, true);
            puts_(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) puts_(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_LLAMA2: /* add_generation_prompt changes nothing: [/INST] is the prompt */
        for (int i = sys, j = 0; i < n; i++, j++) {
            if (role_is(&m[i], "user") != (j % 2 == 0)) {
                free(b.s);
                return ir_fail(AF_ERR_INVALID, "message %d is from the %s: Llama 2's chat template needs the roles to "
                               "alternate user/assistant/user/... after an optional first system message", i, m[i].role);
            }
            sbuf content = { 0 };
            if (j == 0 && sys) {
                puts_(&content, "<<SYS>>\n");
                puts_(&content, m[0].content);
                puts_(&content, "\n<</SYS>>\n\n");
            }
            puts_(&content, m[i].content);
            if (content.oom) b.oom = true;
            bool user = role_is(&m[i], "user");
            puts_(&b, user ? c->bos : " ");
            if (user) puts_(&b, "[INST] ");
            if (content.s) put_stripped(&b, content.s, true, true, true);
            free(content.s);
            if (user) puts_(&b, " [/INST]");
            else { puts_(&b, " "); puts_(&b, c->eos); }
        }
        break;
    }
    if (!b.s && !b.oom) puts_(&b, "");
    if (b.oom) { free(b.s); return ir_fail(AF_ERR_NOMEM, "af_hf_chat_render: out of memory"); }
    *text = b.s;
    if (len) *len = b.n;
    return AF_OK;
}

af_status af_hf_chat_encode(const af_hf_chat *c, const af_hf_tokenizer *t, const af_chat_message *m, int n,
                            int add_generation_prompt, int32_t **ids, int64_t *count) {
    if (!t || !ids || !count) return ir_fail(AF_ERR_INVALID, "af_hf_chat_encode: NULL argument");
    char *text;
    size_t len;
    af_status st = af_hf_chat_render(c, m, n, add_generation_prompt, &text, &len);
    if (st) return st;
    /* as transformers: the rendered text encoded without the post-processor's template */
    st = af_hf_tokenizer_encode(t, text, len, ids, count);
    free(text);
    return st;
}

int32_t af_hf_tokenizer_token_id(const af_hf_tokenizer *t, const char *token) {
    if (!t || !token || !*token) return -1;
    int32_t *ids = NULL, id = -1;
    int64_t n = 0;
    if (af_hf_tokenizer_encode(t, token, strlen(token), &ids, &n) == AF_OK && n == 1) id = ids[0];
    free(ids); /* af_free: the model layer's name for free */
    return id;
}
