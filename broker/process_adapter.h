// Adapter processes (docs/adapters.md): `--adapter CMD` and `--live`.
//
// The adapter is a child process speaking JSON lines: one request per line on its stdin, one reply
// per line on its stdout; its stderr is inherited (passes through to ours). It is started lazily on
// the first call and kept for the run. Everything it sends is hostile input: a late reply is Timeout,
// a malformed, oversized or mismatched reply is CapabilityFailed naming the problem, and a process
// that dies before replying is restarted once for the attempt, then CapabilityFailed. A process whose
// state is unknown (after a timeout or a protocol error) is killed and restarted on the next call.
// Nothing blocks forever: every wait is a poll() bounded by the call's deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/adapter.h"
#include "broker/child_process.h"  // splitCommand

namespace remit {

struct ProcessAdapterOptions {
    // The longest reply line accepted; a longer one is CapabilityFailed and the process restarted.
    std::size_t maxLineBytes = std::size_t{64} << 20;
    // Used when a request's timeoutMs is 0 (the broker normally fills it in).
    uint64_t defaultTimeoutMs = 300'000;
    // Extra time a freshly (re)started process gets for its first request, for start-up (a Python
    // interpreter importing adapters.py, say).
    uint64_t startupGraceMs = 2'000;
    // On shutdown: how long a child may take to exit after its stdin closes, then after SIGTERM,
    // before SIGKILL.
    uint64_t exitGraceMs = 100;
    uint64_t termGraceMs = 500;
    // The directory the process starts in (empty: the caller's). A resume passes the one the run
    // recorded, so `--adapter "python3 ad.py"` finds ad.py from wherever the resume is typed.
    std::string workingDir;
};

// One reply line from an adapter process (without its newline), judged against the request it
// should answer, the one numbered `id`. Pure: the process adapter runs it on every line it reads,
// and the fuzz harness tests/fuzz/fuzz_adapter_reply.cpp on any bytes.
struct AdapterReplyLine {
    enum class Kind : uint8_t {
        // A reply to this request: `reply` is its result or failure; a reply whose fields are wrong
        // is a CapabilityFailed naming the problem (the stream is still in step).
        Answer,
        // A reply to an earlier request (one that timed out): skipped, `reply` is empty.
        Stale,
        // Not a reply to this request (not a JSON object, no id, a later or negative id): `reply` is
        // a CapabilityFailed naming the problem, and the process's state is unknown.
        OutOfStep,
    } kind = Kind::Answer;
    AdapterReply reply;
};
AdapterReplyLine parseAdapterReply(std::string_view line, uint64_t id);

// `--adapter CMD`: argv from splitCommand, run with execvp semantics (PATH lookup). Fails (null
// with `error`) when the command is empty, does not split, or its program is not found.
std::unique_ptr<Adapter> makeProcessAdapter(const std::string& command, std::string& error);
std::unique_ptr<Adapter> makeProcessAdapter(const std::string& command, const ProcessAdapterOptions& options,
                                            std::string& error);

// `--live`: `python3 SHIM --app-dir APPDIR` (SHIM is scripts/remit-py-adapter), kind() "live".
std::unique_ptr<Adapter> makeLiveAdapter(const std::string& shimPath, const std::string& appDir, std::string& error);
std::unique_ptr<Adapter> makeLiveAdapter(const std::string& shimPath, const std::string& appDir,
                                         const ProcessAdapterOptions& options, std::string& error);

// The lower level both use: an explicit argv, no splitting. `kind` is what kind() returns.
std::unique_ptr<Adapter> makeArgvAdapter(std::vector<std::string> argv, const char* kind,
                                         const ProcessAdapterOptions& options, std::string& error);

}  // namespace remit
