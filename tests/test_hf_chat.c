/* Chat templates (af_hf_chat_*): each family rendered from its real template string
 * against the text transformers' apply_chat_template gives (written out by hand here;
 * tests/hf/check_chat.py compares ids with transformers itself), and the refusals. */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* Qwen2-Instruct's template (tokenizer_config.json, Jinja's \n kept as backslash-n). */
static const char QWEN2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a "
    "helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/* Qwen3's assistant turn (the parts that matter; the whole string is in check_chat.py). */
static const char QWEN3[] =
    "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == \"assistant\" %}{%- set reasoning_content = '' %}"
    "{%- if '</think>' in content %}{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char LLAMA3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set "
    "content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
static const char LLAMA2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for "
    "message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false "
    "%}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' "
    "}}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

static void expect(const char *tmpl, const char *bos, const char *eos, const char *family, const af_chat_message *m, int n,
                   int gen, const char *want) {
    af_hf_chat *c = af_hf_chat_parse(tmpl, bos, eos, "tmpl");
    CHECK(c != NULL, "%s: %s", family, af_error_message());
    if (!c) return;
    CHECK(!strcmp(af_hf_chat_family(c), family), "family %s, want %s", af_hf_chat_family(c), family);
    char *text = NULL;
    size_t len = 0;
    af_status st = af_hf_chat_render(c, m, n, gen, &text, &len);
    CHECK(st == AF_OK && text && len == strlen(want) && !memcmp(text, want, len), "%s: got [%s]\nwant [%s]", family,
          text ? text : af_error_message(), want);
    af_free(text);
    af_hf_chat_free(c);
}

static void refused(const char *tmpl, const char *bos, const char *want) {
    af_hf_chat *c = af_hf_chat_parse(tmpl, bos, "</s>", "tokenizer_config.json");
    CHECK(!c && strstr(af_error_message(), want), "want a refusal naming '%s', got: %s", want, c ? "accepted" : af_error_message());
    af_hf_chat_free(c);
}

int main(void) {
    const af_chat_message one[] = { { "user", "Hi there" } };
    const af_chat_message sys3[] = { { "system", "Be brief." }, { "user", "2+2?" }, { "assistant", " 4 " }, { "user", "Ünïcode ✓ 日本" } };
    expect(QWEN2, NULL, NULL, "chatml", one, 1, 1,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
    expect(QWEN2, NULL, NULL, "chatml", sys3, 4, 0,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n 4 <|im_end|>\n"
           "<|im_start|>user\nÜnïcode ✓ 日本<|im_end|>\n");
    /* Qwen3: history turns lose their <think> block; the last turn after the query keeps one */
    const af_chat_message q3[] = { { "user", "a" }, { "assistant", "<think>\nwhy\n</think>\n\nsure" }, { "user", "b" },
                                   { "assistant", "<think>\nhm\n</think>\n\nok" } };
    expect(QWEN3, NULL, NULL, "qwen3", q3, 4, 0,
           "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nsure<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
           "<|im_start|>assistant\n<think>\nhm\n</think>\n\nok<|im_end|>\n");
    expect(QWEN3, NULL, NULL, "qwen3", q3, 3, 1,
           "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nsure<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
           "<|im_start|>assistant\n");
    const af_chat_message q3b[] = { { "user", "a" }, { "assistant", "plain" } };
    expect(QWEN3, NULL, NULL, "qwen3", q3b, 2, 0,
           "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nplain<|im_end|>\n");
    /* Llama 3: content trimmed (Unicode whitespace too), BOS once */
    const af_chat_message l3[] = { { "system", " sys\n" }, { "user", "\xc2\xa0q \t" } };
    expect(LLAMA3, "<|begin_of_text|>", "<|eot_id|>", "llama3", l3, 2, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>"
           "\n\nq<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Llama 2: the system folded into the first user turn */
    expect(LLAMA2, "<s>", "</s>", "llama2", sys3, 4, 1,
           "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n2+2? [/INST] 4 </s><s>[INST] Ünïcode ✓ 日本 [/INST]");
    af_hf_chat *c = af_hf_chat_parse(LLAMA2, "<s>", "</s>", "t");
    const af_chat_message two_users[] = { { "user", "a" }, { "user", "b" } };
    char *text = NULL;
    CHECK(c && af_hf_chat_render(c, two_users, 2, 1, &text, NULL) == AF_ERR_INVALID &&
          strstr(af_error_message(), "alternate user/assistant"), "Llama 2 alternation: %s", af_error_message());
    const af_chat_message tool[] = { { "tool", "x" } };
    CHECK(af_hf_chat_render(c, tool, 1, 1, &text, NULL) == AF_ERR_UNSUPPORTED && strstr(af_error_message(), "role \"tool\""),
          "role tool: %s", af_error_message());
    CHECK(!strcmp(af_hf_chat_end_of_turn(c), "</s>"), "Llama 2 ends a turn with eos");
    af_hf_chat_free(c);
    /* refusals name what is wrong and the way out */
    refused("{{ messages[0]['content'] }}<|assistant|>", NULL, "not one aneforge recognises");
    refused("{{ messages[0]['content'] }}<|assistant|>", NULL, "raw prompt");
    refused("{{- bos_token }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}{% set image_ns = namespace(has_images=false) %}"
            "<|start_header_id|><|eot_id|>", "<|begin_of_text|>", "images (Llama 3.2 Vision)");
    refused("{{- bos_token }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}<|start_header_id|><|eot_id|>", "<|begin_of_text|>",
            "neither strftime_now nor a date_string");
    /* Llama 3.1: the system turn first, always, with the template's date */
    static const char L31[] = "{{- bos_token }}{%- set date_string = \"26 Jul 2024\" %}{{- \"Cutting Knowledge Date: December "
                              "2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}<|start_header_id|><|eot_id|>";
    expect(L31, "<|begin_of_text|>", "<|eot_id|>", "llama3.1", one, 1, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: "
           "26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(L31, "<|begin_of_text|>", "<|eot_id|>", "llama3.1", l3, 2, 0,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: "
           "26 Jul 2024\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>");
    refused(LLAMA3, NULL, "needs bos_token");
    return check_finish("hf_chat");
}
