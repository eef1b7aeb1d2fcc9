/* The text parts of `aneforge data` (data_text.c), called from cmd_data.c. */
#ifndef AF_TOOLS_DATA_TEXT_H
#define AF_TOOLS_DATA_TEXT_H
/* argv[0] is "text"; data_dir is the default --dir. Returns the exit code. */
int data_fetch_text(int argc, char **argv, const char *data_dir);
/* argv[0] is "tokenize". Returns the exit code. */
int data_tokenize(int argc, char **argv);
/* One line for `aneforge data info`. */
void data_text_info(const char *data_dir);
#endif
