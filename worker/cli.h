/* Command-line parsing for every subcommand. One table of flags (cli.c) drives
 * both the parser and the --help text, so no flag goes undocumented. */
#ifndef MW_WORKER_CLI_H
#define MW_WORKER_CLI_H

#include <stdio.h>

#include "common/status.h"
#include "worker/opts.h"

typedef enum {
    MW_CMD_NONE,
    MW_CMD_TRAIN,
    MW_CMD_SUMMARY,
    MW_CMD_CLUSTER,
    MW_CMD_EVAL,
    MW_CMD_EXPORT,
    MW_CMD_TFCONFIG,
    MW_CMD_HELP,
    MW_CMD_VERSION
} mw_cmd;

typedef struct {
    mw_cmd cmd;
    int help;                    /* --help given for the subcommand */
    int log_level;               /* -1: unchanged; else mw_log_level */
    int json;                    /* cluster --json */
    const char *hostfile, *task; /* tf-config */
    int port;
    mw_train_opts train; /* train flags; tf_config also for `cluster` */
} mw_cli;

/* Parse argv (argv[0] is the program). Errors name the flag, the value and what
 * was expected, and return MW_EINVAL. Numbers are plain decimal; the directory
 * of an output file (--dump-weights, export --output) must exist and be
 * writable already. */
mw_status mw_cli_parse(mw_cli *c, int argc, char **argv);
void mw_cli_usage(FILE *f);
void mw_cli_help(FILE *f, mw_cmd cmd);

#endif
