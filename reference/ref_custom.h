/* custom ops (ops.md L; Proposal, not in TorchLean): an opaque plugin op whose provider library
 * ships its own forward + VJP reference. capcheck compares the plugin's kernels against that
 * reference only (no ATen).
 *
 * A custom op's reference is an ordinary ref_op whose `name` is the custom op's name (the case
 * line's custom=NAME; shorter than ref_params.custom_name). Two sources:
 *
 *   - built-ins, always available, a static const table inside ref_custom.c (today one
 *     demonstration op, "demo_cube": y = x^3, VJP 3 x^2 g);
 *   - a registry the caller owns (ref_custom_registry; no global state): the harness creates
 *     one per run, registers each plugin's reference ops, and resolves a case's custom=NAME
 *     with ref_custom_find(&registry, name), then drives the returned ref_op directly (its own
 *     shape/forward/vjp/sample, error-model constants, params bits and note).
 *
 * The `custom` entry of the op table (ref_op_find("custom")) has no registry to consult, so it
 * dispatches to the built-ins only; for any other name its shape function says "no custom op
 * named X is registered". Registered ops are held by pointer: the caller keeps them alive
 * (a plugin's static table, typically) for as long as the registry is used. */
#ifndef CAPCHECK_REF_CUSTOM_H
#define CAPCHECK_REF_CUSTOM_H

#include "ref.h"

#define REF_CUSTOM_MAX 16

typedef struct {
    int count;
    const ref_op *ops[REF_CUSTOM_MAX];
} ref_custom_registry;

/* An empty registry. */
void ref_custom_registry_init(ref_custom_registry *reg);

/* Adds impl; returns 0, or -1 when the registry is full, the name is already taken (by a
 * built-in or an earlier registration), or impl is unusable: NULL, no name or a name too long
 * for custom=NAME, the reserved name "custom", no shape or forward, requires_vjp without a vjp,
 * or inconsistent input counts. */
int ref_custom_register(ref_custom_registry *reg, const ref_op *impl);

/* The reference of custom op `name`: a built-in first, then reg (which may be NULL). */
const ref_op *ref_custom_find(const ref_custom_registry *reg, const char *name);

/* The built-in custom ops. */
int ref_custom_builtin_count(void);
const ref_op *ref_custom_builtin_at(int i);

#endif
