/* `capcheck help [COMMAND]` and `capcheck COMMAND --help`: what every command does, its options,
 * its exit codes, and the providers. One table (help.c), so the help of a command is written
 * once. */
#ifndef CAPCHECK_HELP_H
#define CAPCHECK_HELP_H

#include <stdio.h>

/* 1 when COMMAND has a help text (every command capcheck has). */
int cc_help_known(const char *command);
/* The help of COMMAND, or (NULL) the overview: commands, exit codes, providers. 0, or -1 for an
 * unknown command (nothing printed). */
int cc_help_print(FILE *f, const char *command);

#endif
