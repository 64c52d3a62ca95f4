/* Remit's embedding API for C and for other languages' bindings (docs/embedding.md). A thin C ABI
 * over include/remit/remit.hpp: the same compile, the same runs under the same broker, the same
 * decisions. Everything crosses as NUL-terminated UTF-8 text (values and call descriptions as JSON)
 * and opaque handles; no Remit type is visible.
 *
 *     char* diagnostics = NULL;
 *     remit_program* program = remit_compile(source, host, NULL, 0, &diagnostics);
 *     remit_run* run = remit_run_new(program, policy, 0, NULL, &diagnostics);
 *     remit_status s = remit_run_start(run, "{\"ticket\": \"...\"}");
 *     while (s == REMIT_HOST_CALL || s == REMIT_NEEDS_APPROVAL) {
 *         const char* call = remit_run_call_json(run);   // site, resource, args, tags, reasons, ...
 *         if (s == REMIT_NEEDS_APPROVAL) s = ask_a_person(call) ? remit_run_approve(run, "alice") : remit_run_refuse(run);
 *         else s = remit_run_complete(run, perform(call), -1.0);   // or remit_run_fail(run, "Timeout", "")
 *     }
 *
 * Strings the library returns through `char**` are the caller's to free with remit_free(); strings
 * returned as `const char*` belong to the handle and live until its next call or its free. A
 * function given a handle in the wrong state returns REMIT_MISUSE and changes nothing. */
#ifndef REMIT_REMIT_H
#define REMIT_REMIT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REMIT_C_VERSION_MAJOR 0
#define REMIT_C_VERSION_MINOR 1
#define REMIT_C_VERSION_PATCH 0

typedef struct remit_program remit_program;
typedef struct remit_run remit_run;

typedef enum remit_status {
    REMIT_HOST_CALL = 0,       /* a call waits: remit_run_complete() or remit_run_fail() */
    REMIT_NEEDS_APPROVAL = 1,  /* a call waits for a person: remit_run_approve() or remit_run_refuse() */
    REMIT_COMPLETED = 2,       /* remit_run_result_json() */
    REMIT_FAILED = 3,          /* remit_run_failure_json() */
    REMIT_MISUSE = 4           /* the handle was not in a state that allows this call */
} remit_status;

/* "0.1.0". */
const char* remit_version(void);

/* Compiles `source` against the host interface `host`, optionally checking it against `policy_toml`
 * (NULL: none). Returns NULL when it does not check. `diagnostics_json` (may be NULL) receives a
 * JSON array of diagnostics ({code, severity, message, file, line, col, end_line, end_col, hint,
 * notes}) whatever the outcome; free it with remit_free(). `strict_flows` != 0 selects strict flows. */
remit_program* remit_compile(const char* source, const char* host, const char* policy_toml, int strict_flows,
                             char** diagnostics_json);
void remit_program_free(remit_program* program);
/* The manifest (docs/manifest.md) as JSON; owned by the program. */
const char* remit_program_manifest_json(const remit_program* program);
const char* remit_program_hash(const remit_program* program);

/* A run of `program` under `policy_toml` (NULL or "" with allow_all != 0: every resource granted;
 * NULL or "" otherwise: nothing granted, so a program that calls anything is refused). `state_dir` (NULL: none) as `remitvm run --state-dir`:
 * trace and approval store there. Returns NULL when the policy is invalid (diagnostics_json as
 * for remit_compile). */
remit_run* remit_run_new(const remit_program* program, const char* policy_toml, int allow_all, const char* state_dir,
                         char** diagnostics_json);
void remit_run_free(remit_run* run);

remit_status remit_run_start(remit_run* run, const char* inputs_json);
remit_status remit_run_approve(remit_run* run, const char* by);
remit_status remit_run_refuse(remit_run* run);
/* `cost_usd` < 0: the declared cost. */
remit_status remit_run_complete(remit_run* run, const char* result_json, double cost_usd);
/* `error`: "CapabilityFailed" or "Timeout"; `message` may be NULL. */
remit_status remit_run_fail(remit_run* run, const char* error, const char* message);
remit_status remit_run_status(const remit_run* run);

/* The waiting call as JSON: {kind, site, resource, agent, line, col, args, arg_tags, pc_tags,
 * attempt, returns, schema, approval_reasons, approval_digest, approved_by, idempotency_key,
 * result_tags}; NULL when no call waits. Owned by the run. */
const char* remit_run_call_json(remit_run* run);
/* Completed: {"result": value, "tags": [...], "spent_usd": n}; Failed: {"code", "name", "message",
 * "line", "col", "details", "rendered"}. NULL otherwise. Owned by the run. */
const char* remit_run_result_json(remit_run* run);
const char* remit_run_failure_json(remit_run* run);
const char* remit_run_id(const remit_run* run);
/* Any thread: stops the run at its next back-edge or call (R0702). */
void remit_run_abort(remit_run* run);

void remit_free(char* text);

#ifdef __cplusplus
}
#endif

#endif /* REMIT_REMIT_H */
