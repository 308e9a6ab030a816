/* `capcheck power`: the detection-power table of a run made with --power (harness/run/power.h
 * measures each case): per op x dtype, the smallest and the median case's figures, beside
 * another run's (--before) when given. The suite rejects a perturbation when one of its passing
 * cases does. */
#ifndef CAPCHECK_POWER_TABLE_H
#define CAPCHECK_POWER_TABLE_H

#include <stdio.h>

/* capcheck power DIR [--before DIR] [--markdown FILE]: the table of a run made with --power
 * (beside a second such run's, typically the relaxed model's, with --before). Exit 0, or 2 for a
 * folder without such results (one sentence). */
int cc_power_command(int argc, char **argv, FILE *out, FILE *err);

#endif
