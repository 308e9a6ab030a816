/* The evidence commands of the CLI: gate, evidence, emit-lean, diff, merge, validate (their
 * options are their own; main.c hands them argv). */
#ifndef CAPCHECK_COMMANDS_H
#define CAPCHECK_COMMANDS_H

int cc_is_evidence_command(const char *name);
/* argv[1] is the command. Returns the exit code. */
int cc_evidence_command(int argc, char **argv);

#endif
