/* The aneforge command-line tool: one file per subcommand. Each returns the exit code. */
#ifndef AF_TOOLS_CLI_H
#define AF_TOOLS_CLI_H
int cmd_ops(int argc, char **argv);
int cmd_op(int argc, char **argv);   /* aneforge op NAME: one op on .npy inputs */
int cmd_data(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_llama(int argc, char **argv); /* `train llama`, dispatched by cmd_train */
int cmd_mil(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_cost(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_export_coreml(int argc, char **argv);
int cmd_run_package(int argc, char **argv); /* cmd_mil.c: aneforge run = mil run */ /* export_coreml.c: export --format coreml */
int cmd_tokenizer(int argc, char **argv);
int cmd_dashboard(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_hf(int argc, char **argv);
#endif
