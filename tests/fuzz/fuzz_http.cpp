// libFuzzer harness for the HTTP request parser of `remitvm mcp --http` (cli/http_server.h): the
// first code that reads bytes from the network, so it must survive any input without crashing,
// hanging, reading out of bounds or allocating without bound.
//
// The first input byte picks how the rest arrives: in one piece, or in chunks of 1 to 16 bytes, as
// a client trickling a request would send it. findHeadEnd is fed the growing buffer the way the
// connection loop feeds it, and must find the same end of head whatever the chunking. When a head
// is found it is parsed, and the harness checks the parser's promises, trapping if one breaks:
//   - a success fills method, target and path, with the path taken from the target (or "/");
//   - header names are lower case and values carry no surrounding blanks;
//   - a Content-Length never exceeds the body limit (413 is the answer then);
//   - a failure is one of the documented statuses, with a reason.
// The response serializer is exercised on the parsed fields too.
//
// Build and run: `scripts/fuzz http SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_http_replay FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "cli/http_server.h"

namespace {

using namespace remit::cli::http;

[[noreturn]] void broken(const char* what, size_t size) {
    std::fprintf(stderr, "\n*** fuzz_http: %s (input of %zu bytes)\n", what, size);
    __builtin_trap();
}

// The end of the head when the whole input is there at once.
std::optional<size_t> headEndAtOnce(std::string_view input) {
    size_t from = 0;
    return findHeadEnd(input, from);
}

// The end of the head when the input arrives in chunks of `chunk` bytes.
std::optional<size_t> headEndInChunks(std::string_view input, size_t chunk) {
    std::string buffer;
    size_t from = 0;
    for (size_t at = 0; at < input.size(); at += chunk) {
        buffer.append(input.substr(at, chunk));
        if (std::optional<size_t> end = findHeadEnd(buffer, from)) return end;
    }
    return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    size_t chunk = 1 + data[0] % 16;
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
    if (input.size() > 2 * kMaxHeadBytes) return 0;  // the server stops reading a head long before

    std::optional<size_t> end = headEndAtOnce(input);
    if (headEndInChunks(input, chunk) != end) broken("the end of the head depends on how the bytes arrived", size);
    if (!end) return 0;
    if (*end > input.size()) broken("the end of the head lies past the input", size);

    Limits limits;
    limits.maxBody = 1 << 20;
    Request request;
    std::string problem;
    int status = parseRequestHead(input.substr(0, *end), limits, request, problem);
    if (status != 0) {
        if (status != 400 && status != 411 && status != 413 && status != 431 && status != 505)
            broken("a failure status the parser does not document", size);
        if (problem.empty()) broken("a failure without a reason", size);
        (void)serializeResponse(Response::error(status, problem), false, false);
        return 0;
    }
    if (request.method.empty() || request.target.empty()) broken("a request without method or target", size);
    if (request.path != "/" && request.target.find(request.path) == std::string::npos)
        broken("a path that is not part of the target", size);
    if (request.headers.size() > kMaxHeaders) broken("more headers than the limit", size);
    for (const auto& [name, value] : request.headers) {
        if (name.empty() || name != lowerAscii(name)) broken("a header name that is empty or not lower case", size);
        if (value != trimOws(value)) broken("a header value with surrounding blanks", size);
    }
    if (request.contentLength && *request.contentLength > limits.maxBody) broken("a Content-Length over the limit", size);

    Response echo = Response::text(200, request.target);
    echo.headers.emplace_back("x-method", request.method);
    std::string bytes = serializeResponse(echo, request.keepAlive, request.method == "HEAD");
    if (bytes.compare(0, 9, "HTTP/1.1 ") != 0) broken("a response that does not start with its status line", size);
    return 0;
}
