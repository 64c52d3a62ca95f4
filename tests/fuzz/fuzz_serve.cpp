// libFuzzer harness for `remitvm serve` (session/serve_session.h): the request lines a host
// forwards from whoever wrote the program — source, host interface, grants, inputs, limits, and the
// results the host hands back at each call. The input is a serve session: its lines are parsed
// with parseRequest and dispatched the way cli/serve_command.cpp dispatches them (one Session per
// session id, run → start, resume → resume, abort → requestAbort and abortPaused), one thread, under
// limits small enough for a fuzzer (steps, host calls, memory and result size cut down, the wall
// limit at one second; a request's own smaller limits are kept). At the end every session still
// paused is aborted, as the server does at end of input. The harness traps when a promise breaks:
//   - a line that does not parse gets a bad_request error reply with a message;
//   - every reply is an object whose status is rejected, host-call, completed, failed or error,
//     carrying the request's id when it had one and its session; an error has a code and a message;
//     a rejected or failed reply has diagnostics and their rendered text;
//   - nothing throws (the server would have to answer host_error and close the session);
//   - an aborted pause ends as failed with stage aborted, and the session is finished.
//
// Build and run: `scripts/fuzz serve SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_serve_replay FILE...
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/json_text.h"
#include "session/serve_session.h"

namespace {

using namespace remit;
using serve::Request;

[[noreturn]] void broken(const std::string& what, std::string_view input, const Json& reply) {
    std::string shown = reply.dump(-1, ' ', false, Json::error_handler_t::replace);
    std::fprintf(stderr, "\n*** fuzz_serve: %s\n--- reply\n%s\n--- input (%zu bytes)\n%.*s\n---\n", what.c_str(),
                 shown.c_str(), input.size(), static_cast<int>(input.size()), input.data());
    __builtin_trap();
}

// At most this many lines of an input are served, and this many sessions live at once.
constexpr size_t kMaxLines = 24;
constexpr size_t kMaxSessions = 4;

serve::Limits fuzzLimits(serve::Limits asked) {
    serve::Limits l;
    l.steps = std::min<uint64_t>(asked.steps, 50'000);
    l.wallMs = std::min<uint64_t>(asked.wallMs, 1'000);
    l.hostCalls = std::min<uint64_t>(asked.hostCalls, 16);
    l.resultBytes = std::min<uint64_t>(asked.resultBytes, 64 << 10);
    l.memory = std::min<uint64_t>(asked.memory, 8 << 20);
    return l;
}

void checkReply(const Json& reply, const Json& id, const std::string& session, std::string_view input) {
    if (!reply.is_object() || !reply.contains("status") || !reply["status"].is_string())
        broken("a reply that is not an object with a status", input, reply);
    const std::string status = reply["status"].get<std::string>();
    if (status != "rejected" && status != "host-call" && status != "completed" && status != "failed" &&
        status != "error")
        broken("a reply with an undocumented status", input, reply);
    if (!id.is_null() && (!reply.contains("id") || reply["id"] != id))
        broken("a reply without its request's id", input, reply);
    if (!session.empty() && reply.value("session", "") != session) broken("a reply without its session", input, reply);
    if (status == "error") {
        const Json& e = reply.contains("error") ? reply["error"] : Json();
        if (!e.is_object() || !e.contains("code") || !e["code"].is_string() || !e.contains("message") ||
            !e["message"].is_string() || e["message"].get<std::string>().empty())
            broken("an error reply without a code and a message", input, reply);
    }
    if ((status == "rejected" || status == "failed") &&
        (!reply.contains("diagnostics") || !reply["diagnostics"].is_array() || reply["diagnostics"].empty() ||
         !reply.contains("rendered") || !reply["rendered"].is_string()))
        broken("a rejection or failure without its diagnostics and rendered text", input, reply);
    // What the server prints (invalid UTF-8 in hostile strings is replaced, never thrown).
    (void)reply.dump(-1, ' ', false, Json::error_handler_t::replace);
}

struct Server {
    std::map<std::string, std::unique_ptr<serve::Session>> sessions;
    std::string_view input;

    void dispatch(std::string_view line) {
        Json reply;
        std::optional<Request> parsed = serve::parseRequest(line, reply);
        if (!parsed) {
            if (!reply.is_object() || reply.value("status", "") != "error" || !reply.contains("error") ||
                reply["error"].value("code", "") != "bad_request")
                broken("a malformed line without a bad_request reply", input, reply);
            checkReply(reply, nullptr, "", input);
            return;
        }
        Request& r = *parsed;
        const bool run = r.type == Request::Type::Run, resume = r.type == Request::Type::Resume;
        const std::string name = run ? r.run.session : resume ? r.resume.session : r.abort.session;
        const Json id = run ? r.run.id : resume ? r.resume.id : r.abort.id;
        auto it = sessions.find(name);
        if (run) {
            if (it != sessions.end() || sessions.size() >= kMaxSessions) return;  // session_busy, too_many_sessions
            r.run.limits = fuzzLimits(r.run.limits);
            auto session = std::make_unique<serve::Session>(std::move(r.run));
            Json started = session->start();
            checkReply(started, id, name, input);
            if (!session->finished()) sessions.emplace(name, std::move(session));
            return;
        }
        if (it == sessions.end()) return;  // unknown_session
        serve::Session& session = *it->second;
        if (resume) {
            Json resumed = session.resume(r.resume);
            checkReply(resumed, id, name, input);
        } else {
            session.requestAbort();
            Json aborted = session.abortPaused(id);
            checkReply(aborted, id, name, input);
            if (aborted.value("status", "") != "failed" || aborted.value("stage", "") != "aborted")
                broken("an aborted pause that did not fail as aborted", input, aborted);
        }
        if (session.finished()) sessions.erase(it);
    }

    // End of input: every paused session is aborted.
    void finish() {
        for (auto& [name, session] : sessions) {
            if (!session->paused()) continue;
            session->requestAbort();
            Json aborted = session->abortPaused(nullptr);
            checkReply(aborted, nullptr, name, input);
            if (aborted.value("status", "") != "failed" || !session->finished())
                broken("a session aborted at end of input did not end as failed", input, aborted);
        }
        sessions.clear();
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    Server server;
    server.input = input;
    try {
        size_t start = 0, lines = 0;
        while (start < input.size() && lines < kMaxLines) {
            size_t nl = input.find('\n', start);
            std::string_view line =
                input.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
            start = nl == std::string_view::npos ? input.size() : nl + 1;
            ++lines;
            // As the server reads its input: a trailing \r dropped, blank lines ignored.
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
            server.dispatch(line);
        }
        server.finish();
    } catch (const std::exception& e) {
        broken(std::string("an exception escaped the engine: ") + e.what(), input, Json());
    }
    return 0;
}
