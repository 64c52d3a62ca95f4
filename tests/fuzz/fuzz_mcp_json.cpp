// libFuzzer harness for the JSON text an MCP client sends before any tool sees it
// (runtime/json_text.h): the lone-surrogate repair every message passes through and the id
// recovery of a message that does not parse. Both read a stranger's bytes, so they must survive
// any input, and the harness traps when one of their promises breaks:
//   - the repair is idempotent, and leaves text the parser accepts unchanged (valid JSON holds no
//     lone surrogate);
//   - repaired text that parses has no lone surrogate left: re-serialising it and repairing again
//     changes nothing;
//   - a recovered id is null, a string or an integer, and when the text parses as an object whose
//     only "id" key holds a string or integer, it is that value.
//
// Build and run: `scripts/fuzz mcp_json SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_mcp_json_replay FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace {

[[noreturn]] void broken(const char* what, size_t size) {
    std::fprintf(stderr, "\n*** fuzz_mcp_json: %s (input of %zu bytes)\n", what, size);
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    if (remit::jsonNestsDeeperThan(text, remit::kMaxJsonNesting)) return 0;  // refused unparsed
    std::string repaired = remit::replaceLoneSurrogates(text);
    if (remit::replaceLoneSurrogates(repaired) != repaired) broken("the repair is not idempotent", size);
    // The parser takes a NUL for the end of its input; the server refuses such text unparsed.
    bool hasNul = text.find('\0') != std::string_view::npos;
    remit::Json original = hasNul ? remit::Json(remit::Json::value_t::discarded) : remit::Json::parse(text, nullptr, false);
    if (!original.is_discarded() && repaired != text) broken("valid JSON was changed", size);
    remit::Json parsed = hasNul ? remit::Json(remit::Json::value_t::discarded) : remit::Json::parse(repaired, nullptr, false);
    if (!parsed.is_discarded()) {
        std::string again = parsed.dump(-1, ' ', false, remit::Json::error_handler_t::replace);
        if (remit::replaceLoneSurrogates(again) != again) broken("a lone surrogate survived the repair", size);
    }
    remit::Json id = remit::recoverMessageId(text);
    if (!id.is_null() && !id.is_string() && !id.is_number_integer()) broken("an id of another kind", size);
    if (!original.is_discarded() && original.is_object() && original.count("id") == 1 &&
        (original["id"].is_string() || original["id"].is_number_integer()) &&
        text.find("\"id\"") != std::string_view::npos && text.find("\"id\"") == text.rfind("\"id\"") &&
        id != original["id"])
        broken("the id of a valid message was not recovered", size);
    return 0;
}
