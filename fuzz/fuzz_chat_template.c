/* libFuzzer target for chat templates (src/text/chat_template.c): the input is a template
 * text, then (after a NUL byte, when there is one) message content of any bytes. A
 * template is refused with a message or recognised; a recognised one renders a few
 * conversations (the content as system, user and assistant turns, with and without the
 * generation prompt) to NUL-terminated text that holds the user's content whenever the
 * family keeps it untrimmed (ChatML), or refuses them with a message.
 *
 *   make fuzz            (builds build-fuzz/fuzz_chat_template; seeds in tests/corpus/chat_template) */
#include "aneforge.h"
#include "aneforge_hf.h"
#include "fuzz_util.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size + 2);
    if (!copy) return 0;
    memcpy(copy, data, size);
    copy[size] = copy[size + 1] = 0;
    const char *content = copy + strlen(copy) + (strlen(copy) < size); /* after the first NUL, or "" */
    af_hf_chat *c = af_hf_chat_parse(copy, size & 1 ? "<s>" : NULL, size & 2 ? "</s>" : "<|eot_id|>", "fuzz");
    if (!c) {
        REQUIRE(af_error_message()[0] != 0);
        free(copy);
        return 0;
    }
    REQUIRE(af_hf_chat_family(c) && af_hf_chat_end_of_turn(c));
    const af_chat_message conv[] = { { "system", content }, { "user", content }, { "assistant", content }, { "user", "q" } };
    for (int start = 0; start < 2; start++)
        for (int n = 1; n <= 4 - start; n++)
            for (int gen = 0; gen < 2; gen++) {
                char *text = NULL;
                size_t len = 0;
                if (af_hf_chat_render(c, conv + start, n, gen, &text, &len) == AF_OK) {
                    REQUIRE(text && text[len] == 0 && strlen(text) <= len);
                    if (!strcmp(af_hf_chat_family(c), "chatml") && n >= 2 - start)
                        REQUIRE(strstr(text, content) != NULL);
                    af_free(text);
                } else
                    REQUIRE(af_error_message()[0] != 0);
            }
    af_hf_chat_free(c);
    free(copy);
    return 0;
}
