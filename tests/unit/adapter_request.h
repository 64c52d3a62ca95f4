// A capability call as the broker hands it to an adapter, for the unit tests of adapters (adapter
// processes, MCP servers): one run, one site, one idempotency key.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "broker/adapter.h"

namespace remit::test {

inline AdapterRequest callRequest(std::string resource, Json args, uint64_t timeoutMs) {
    AdapterRequest r;
    r.kind = AdapterRequest::Kind::Call;
    r.runId = "run-1";
    r.site = "main#0";
    r.idempotencyKey = "0123456789abcdef0123456789abcdef";
    r.timeoutMs = timeoutMs;
    r.resource = std::move(resource);
    r.args = std::move(args);
    return r;
}

}  // namespace remit::test
