/* A C host that embeds Remit through its C ABI (docs/embedding.md): the same refund_bot run as
 * host.cpp, answering each call from canned answers and approving the refund.
 *
 *   host_c EXAMPLE_DIR [STATE_DIR] */
#include <remit/remit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char* read_file(const char* dir, const char* name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* text = malloc((size_t)size + 1);
    size_t got = fread(text, 1, (size_t)size, f);
    text[got] = '\0';
    fclose(f);
    return text;
}

/* The call JSON names the resource and, for agent calls, the agent. */
static const char* answer(const char* call) {
    if (strstr(call, "\"agent\":\"Triager\""))
        return "{\"intent\": \"refund\", \"order_id\": \"A-1001\", \"reason\": \"the kettle from order A-1001 arrived with a cracked lid\"}";
    if (strstr(call, "\"agent\":\"Writer\""))
        return "\"Dear Ada, we are sorry the kettle arrived damaged. We have refunded 49.50 for order A-1001.\"";
    if (strstr(call, "\"resource\":\"crm.customer_by_email\""))
        return "{\"id\": \"C-1\", \"name\": \"Ada Lovelace\", \"email\": \"ada@example.com\"}";
    if (strstr(call, "\"resource\":\"shop.order\""))
        return "{\"id\": \"A-1001\", \"customer_id\": \"C-1\", \"total\": 49.5, \"status\": \"delivered\"}";
    if (strstr(call, "\"resource\":\"payments.refund\"")) return "\"rf_7731\"";
    return "null";
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: host_c EXAMPLE_DIR [STATE_DIR]\n");
        return 2;
    }
    char* source = read_file(argv[1], "refund_bot.rmt");
    char* host = read_file(argv[1], "host.rmti");
    char* policy = read_file(argv[1], "policy.toml");
    char* inputs = read_file(argv[1], "inputs.json");
    if (!source || !host || !policy || !inputs) {
        fprintf(stderr, "host_c: cannot read the example in %s\n", argv[1]);
        return 2;
    }
    char* diagnostics = NULL;
    remit_program* program = remit_compile(source, host, NULL, 0, &diagnostics);
    if (!program) {
        fprintf(stderr, "%s\n", diagnostics);
        return 1;
    }
    remit_free(diagnostics);
    remit_run* run = remit_run_new(program, policy, 0, argc > 2 ? argv[2] : NULL, &diagnostics);
    if (!run) {
        fprintf(stderr, "%s\n", diagnostics);
        return 1;
    }
    remit_free(diagnostics);
    remit_status status = remit_run_start(run, inputs);
    while (status == REMIT_HOST_CALL || status == REMIT_NEEDS_APPROVAL) {
        const char* call = remit_run_call_json(run);
        if (status == REMIT_NEEDS_APPROVAL) {
            fprintf(stderr, "approval: %s\n", call);
            status = remit_run_approve(run, "operator");
        } else {
            status = remit_run_complete(run, answer(call), -1.0);
        }
    }
    int exit_code = 0;
    if (status == REMIT_COMPLETED) {
        printf("%s\n", remit_run_result_json(run));
    } else {
        fprintf(stderr, "%s\n", remit_run_failure_json(run));
        exit_code = 1;
    }
    remit_run_free(run);
    remit_program_free(program);
    free(source);
    free(host);
    free(policy);
    free(inputs);
    return exit_code;
}
