// libFuzzer harness for `remitc lsp` (session/lsp_server.h): the bytes an editor writes to the
// language server's stdin — frames, headers, JSON-RPC messages, documents, edits and positions.
// The input is the whole stream; the server runs on it to its end (or `exit`), as `remitc lsp`
// would, with the message limit cut to 64 KiB. The harness traps when a promise breaks:
//   - the server returns, with exit code 0 or 1, and nothing throws out of it;
//   - everything it wrote is a sequence of well-formed frames, each one JSON object with
//     "jsonrpc": "2.0" that is either a notification (publishDiagnostics, logMessage) or a reply
//     with exactly one of result and error, an error having an integer code and a string message;
//   - every published diagnostic has a message and a range of two positions (non-negative line
//     and character), its end not before its start.
// Documents named by file:// URIs are checked against the host.rmti the file system has above them,
// as the real server does: the harness writes one (examples/hello's) to /tmp/remit-fuzz-lsp/, which
// the seeds' documents are in, so their programs are checked, hovered and lensed for real.
//
// Build and run: `scripts/fuzz lsp SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_lsp_replay FILE...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "session/lsp_server.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const std::string& what, std::string_view input) {
    std::fprintf(stderr, "\n*** fuzz_lsp: %s\n--- input (%zu bytes)\n%.*s\n---\n", what.c_str(), input.size(),
                 static_cast<int>(std::min<size_t>(input.size(), 4000)), input.data());
    __builtin_trap();
}

bool isPosition(const Json& p) {
    return p.is_object() && p.contains("line") && p.contains("character") && p["line"].is_number_unsigned() &&
           p["character"].is_number_unsigned();
}

void checkMessage(const Json& m, std::string_view input) {
    if (!m.is_object() || m.value("jsonrpc", "") != "2.0") broken("a message without jsonrpc 2.0", input);
    if (m.contains("method")) {
        if (m.contains("id")) broken("the server sent a request", input);
        const std::string method = m["method"].get<std::string>();
        if (method != "textDocument/publishDiagnostics" && method != "window/logMessage")
            broken("an unexpected notification: " + method, input);
        if (method == "textDocument/publishDiagnostics") {
            const Json& params = m["params"];
            if (!params["uri"].is_string() || !params["diagnostics"].is_array()) broken("a malformed publish", input);
            for (const Json& d : params["diagnostics"]) {
                const Json& r = d["range"];
                if (!isPosition(r["start"]) || !isPosition(r["end"])) broken("a malformed range", input);
                auto key = [](const Json& p) { return std::make_pair(p["line"].get<uint64_t>(), p["character"].get<uint64_t>()); };
                if (key(r["end"]) < key(r["start"])) broken("a range that ends before it starts", input);
                if (!d["message"].is_string()) broken("a diagnostic without a message", input);
            }
        }
        return;
    }
    if (!m.contains("id")) broken("a reply without an id", input);
    if (m.contains("result") == m.contains("error")) broken("a reply needs exactly one of result and error", input);
    if (m.contains("error")) {
        const Json& e = m["error"];
        if (!e.is_object() || !e["code"].is_number_integer() || !e["message"].is_string())
            broken("a malformed error", input);
    }
}

constexpr const char* kHost = R"(input topic tags untrusted

capability web.fetch(url: Str deny private) -> Str
  tags untrusted
  cost 0.001
  idempotent

model llm cost 0.01
)";

void writeHost() {
    std::error_code ec;
    std::filesystem::create_directories("/tmp/remit-fuzz-lsp", ec);
    std::ofstream("/tmp/remit-fuzz-lsp/host.rmti", std::ios::trunc) << kHost;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool hostWritten = (writeHost(), true);
    (void)hostWritten;
    std::string_view input(reinterpret_cast<const char*>(data), size);
    // The reading thread may outlive this call (after `exit`): it owns its copy of the input.
    auto source = std::make_shared<std::pair<std::string, size_t>>(std::string(input), 0);
    lsp::ReadBytes read = [source](char* buffer, size_t n) -> size_t {
        size_t k = std::min(n, source->first.size() - source->second);
        std::memcpy(buffer, source->first.data() + source->second, k);
        source->second += k;
        return k;
    };
    std::string output;
    lsp::WriteBytes write = [&output](std::string_view bytes) {
        output.append(bytes);
        return true;
    };
    int code = -1;
    try {
        code = lsp::runServer(read, write, lsp::ServerOptions{"fuzz", size_t(64) << 10});
    } catch (...) {
        broken("the server threw", input);
    }
    if (code != 0 && code != 1) broken("an exit code other than 0 and 1", input);
    size_t at = 0;
    lsp::FrameReader frames(
        [&](char* buffer, size_t n) -> size_t {
            size_t k = std::min(n, output.size() - at);
            std::memcpy(buffer, output.data() + at, k);
            at += k;
            return k;
        },
        size_t(1) << 30);
    for (lsp::Frame f = frames.next(); f.kind != lsp::Frame::Kind::End; f = frames.next()) {
        if (f.kind != lsp::Frame::Kind::Message) broken("the server wrote a bad frame: " + f.problem, input);
        Json message = Json::parse(f.body, nullptr, false);
        if (message.is_discarded()) broken("the server wrote a frame that is not JSON", input);
        checkMessage(message, input);
    }
    return 0;
}
