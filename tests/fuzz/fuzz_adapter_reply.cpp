// libFuzzer harness for the reply lines of an adapter process (broker/process_adapter.h,
// parseAdapterReply): whatever `--adapter CMD` or `--live` prints on its stdout is judged there, a
// line at a time, against the request it should answer — then the broker converts an ok result to
// the call's declared type (runtime/value_json.h) and the trace records result and meta as
// canonical JSON. The adapter is a program the operator did not write, so every byte is hostile.
//
// The first input byte picks the id of the request being answered (1 to 4), the rest is the
// adapter's output, split into lines as the adapter reads them (a trailing \r dropped, blank lines
// skipped). The harness traps when a promise of the judgement breaks:
//   - an answer or a stale reply comes only from a line that is one JSON object with an unsigned
//     integer id (the request's, or an earlier one for a stale reply), as the strict parser every
//     other reader uses (runtime/json_text.h) reads it;
//   - a stale reply carries nothing; a line out of step is a CapabilityFailed whose message is
//     printable ASCII (it quotes hostile bytes, and goes into traces and terminals);
//   - an ok answer has no error code, a finite non-negative cost when it has one and an object (or
//     nothing) as meta; a failed answer is CapabilityFailed, Timeout or ModelOutputInvalid;
//   - an ok result converts to a typed value or gives a mismatch, never both or neither.
//
// Build and run: `scripts/fuzz adapter_reply SECONDS`. Replay:
// build/fuzz/tests/fuzz/fuzz_adapter_reply_replay FILE...
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "broker/process_adapter.h"
#include "runtime/canonical_json.h"
#include "runtime/heap.h"
#include "runtime/json_text.h"
#include "runtime/types.h"
#include "runtime/value_json.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const char* what, std::string_view line, const AdapterReply& reply) {
    std::fprintf(stderr, "\n*** fuzz_adapter_reply: %s\n--- line (%zu bytes)\n%.*s\n--- reply: ok %d, %s: %s\n", what,
                 line.size(), static_cast<int>(line.size()), line.data(), reply.ok ? 1 : 0, reply.errorCode.c_str(),
                 reply.message.c_str());
    __builtin_trap();
}

bool printableAscii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
    return true;
}

// The nesting the adapter allows a reply (process_adapter.cpp's kMaxReplyDepth).
constexpr size_t kReplyDepth = 512;

void judge(std::string_view line, uint64_t id) {
    AdapterReplyLine judged = parseAdapterReply(line, id);
    const AdapterReply& reply = judged.reply;
    using Kind = AdapterReplyLine::Kind;
    if (judged.kind == Kind::OutOfStep) {
        if (reply.ok || reply.errorCode != "CapabilityFailed" || reply.message.empty())
            broken("a line out of step that is not a CapabilityFailed with a message", line, reply);
        if (!printableAscii(reply.message))
            broken("a message about a broken line that is not printable ASCII", line, reply);
        return;
    }
    // An answer or a stale reply: the line must be one JSON object with an id, read strictly.
    std::string problem;
    std::optional<Json> strict = parseOrderedJsonText("an adapter reply", line, problem, kReplyDepth);
    if (!strict || !strict->is_object()) broken("a reply taken from a line that is not one JSON object", line, reply);
    auto idIt = strict->find("id");
    if (idIt == strict->end() || !idIt->is_number_unsigned()) broken("a reply without an unsigned id", line, reply);
    uint64_t got = idIt->get<uint64_t>();
    if (judged.kind == Kind::Stale) {
        if (got == 0 || got >= id) broken("a stale reply whose id is not an earlier request's", line, reply);
        if (reply.ok || !reply.errorCode.empty() || !reply.message.empty())
            broken("a stale reply that carries something", line, reply);
        return;
    }
    if (got != id) broken("an answer to another request", line, reply);
    if (!reply.ok) {
        if (reply.errorCode != "CapabilityFailed" && reply.errorCode != "Timeout" &&
            reply.errorCode != "ModelOutputInvalid")
            broken("a failure with an undocumented code", line, reply);
        return;
    }
    if (!reply.errorCode.empty()) broken("an ok answer with an error code", line, reply);
    if (reply.costUsd && (!std::isfinite(*reply.costUsd) || *reply.costUsd < 0)) broken("a bad cost", line, reply);
    if (!reply.meta.is_null() && !reply.meta.is_object()) broken("meta that is not an object", line, reply);

    // What the broker does next: the trace records result and meta, the result must fit the
    // call's type (a capability returning List[Hit] max 10, another returning Int).
    volatile size_t sink = canonicalJson(reply.result).size() + canonicalJson(reply.meta).size();
    (void)sink;
    TypeArena arena;
    TypeRef hit = arena.record({{"url", arena.str()}, {"title", arena.str()}}, "Hit");
    for (TypeRef type : {arena.list(hit, 10), arena.integer()}) {
        Heap heap(size_t(16) << 20);
        ValueFromJson v = valueFromJson(heap, reply.result, type, "result");
        if (v.value.has_value() == v.mismatch.has_value() && !heap.failed())
            broken("a result that neither converts nor mismatches (or both)", line, reply);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint64_t id = 1 + data[0] % 4;
    std::string_view output(reinterpret_cast<const char*>(data + 1), size - 1);
    // As the adapter takes lines out of its buffer (ProcessAdapter::takeLine and exchange).
    size_t start = 0;
    while (start <= output.size()) {
        size_t nl = output.find('\n', start);
        if (nl == std::string_view::npos) break;  // no newline: not a line yet
        std::string_view line = output.substr(start, nl - start);
        start = nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
        judge(line, id);
    }
    return 0;
}
