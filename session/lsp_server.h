// `remitc lsp`: the Remit language server (docs/editors.md). LSP 3.17 over JSON-RPC 2.0 with the
// base protocol's `Content-Length` framing, on any byte stream (stdin and stdout for the command;
// strings in the unit tests). cli/ only starts it (cli/commands.cpp, lspCommand).
//
// The server keeps the documents the editor has open, checks each program as `remitc check` would
// (session/lsp_analysis.h) and publishes its diagnostics; it answers hover, go to definition,
// document symbols, completion, code lenses and formatting from the latest analysis of the text the
// request is about. Requests are answered in the order they arrive. Edits are cheap: a document is
// re-checked only once no message is waiting, and a check still running when the next edit arrives
// is abandoned (the checker polls for it), so typing never queues checks of stale text.
//
// Robustness: a frame without a usable Content-Length, a message over the size limit, text that is
// not JSON, a message that is not a request, an unknown method, bad parameters — each gets the
// JSON-RPC error it calls for (or, for a notification, which has no reply, a window/logMessage) and
// the server reads on; nothing a client sends ends it but `exit` or the end of its input. An
// internal failure is a fixed -32603 reply without exception text.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/json_rpc.h"

namespace remit::lsp {

// Reads up to `size` bytes into `buffer`; 0 at the end of the input.
using ReadBytes = std::function<size_t(char* buffer, size_t size)>;
// Writes all of `bytes`; false when the output is gone (the client went away).
using WriteBytes = std::function<bool(std::string_view bytes)>;

// A message's body is at most this long; a longer one is read past and refused. Documents reach
// the server inside messages, so this is also the largest document it can be sent (the compiler's
// own limit, FrontendLimits::maxSourceBytes, then reports E0003 on anything over 1 MiB).
inline constexpr size_t kMaxMessageBytes = size_t(64) << 20;
// A header line longer than this is not a header.
inline constexpr size_t kMaxHeaderLineBytes = 8 * 1024;

// One frame of the base protocol: a message's body, a problem with the framing, or the end.
struct Frame {
    enum class Kind { Message, Problem, End } kind = Kind::End;
    std::string body;     // Message
    std::string problem;  // Problem: what was wrong, for the error reply
    Json id;              // Problem: the id of an over-long message when its first bytes name it
};

// Splits a byte stream into frames. Header names are matched without regard to case, unknown
// headers are ignored, blank lines between messages are skipped, and after a bad header block the
// reader resynchronises at the next line that starts (or contains) `Content-Length:`.
class FrameReader {
public:
    FrameReader(ReadBytes read, size_t maxMessageBytes = kMaxMessageBytes);
    Frame next();

private:
    ReadBytes read_;
    size_t maxMessageBytes_;
    std::string buffer_;
    size_t pos_ = 0;
    bool eof_ = false;
    std::optional<Frame> pending_;  // a message found after a problem that was reported first

    bool fill();
    // A line without its line break; nullopt at the end of the input. A line over the limit is
    // read past and returned cut, with `tooLong` set.
    std::optional<std::string> readLine(bool& tooLong);
    // Reads `n` bytes into `out` (keeping at most `keep` of them); false at the end of the input.
    bool readBody(size_t n, std::string& out, size_t keep);
};

// The frame of one message as the server writes it.
std::string frameMessage(const Json& message);

struct ServerOptions {
    std::string version;  // serverInfo.version
    size_t maxMessageBytes = kMaxMessageBytes;
};

// Runs the server until `exit` or the end of the input; returns the process's exit code: 0 after
// a shutdown request, else 1 (LSP 3.17, "exit").
int runServer(const ReadBytes& read, const WriteBytes& write, const ServerOptions& options = {});

// URIs of local files (file:///path, percent-encoded) to absolute paths and back; nullopt for a
// URI that names no local file (untitled:, a remote authority, a relative path, a NUL).
std::optional<std::string> pathOfUri(std::string_view uri);
std::string uriOfPath(std::string_view path);

}  // namespace remit::lsp
