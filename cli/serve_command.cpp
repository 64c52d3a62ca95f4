// `remitvm serve`: checked runs over JSON lines (docs/serve.md). This file is only the transport:
// it reads request lines on stdin, hands each to its session's thread, and writes replies on
// stdout, one whole line each under a mutex. What a request means and what a reply says is
// session/serve_session.h's business.
//
// Threads: the main thread reads stdin and dispatches; each session has a worker thread that
// runs its requests in order (run, then resumes) and ends when the session finishes. An abort is
// signalled to the session directly from the reader (so it stops a pure loop while its worker is
// busy), then queued so a session paused at a host call ends too.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "session/serve_session.h"
#include "cli/commands.h"

namespace remit::cli {

namespace {

using remit::Json;
using serve::Request;

// Sessions alive at once; more is a `too_many_sessions` error.
constexpr size_t kMaxSessions = 64;

class Output {
public:
    // Never throws: a reply that cannot be printed becomes the fixed host_error line.
    void write(const Json& reply) noexcept {
        std::string line;
        try {
            line = reply.dump(-1, ' ', false, Json::error_handler_t::replace);
            line += '\n';
        } catch (...) {
            line =
                R"({"status":"error","error":{"code":"host_error","message":"internal error: the request could not be completed and its session was closed"}})"
                "\n";
        }
        std::lock_guard<std::mutex> lock(mutex_);
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
    }

private:
    std::mutex mutex_;
};

const Json& requestId(const Request& r) {
    switch (r.type) {
        case Request::Type::Run:
            return r.run.id;
        case Request::Type::Resume:
            return r.resume.id;
        case Request::Type::Abort:
            break;
    }
    return r.abort.id;
}

struct Slot {
    std::string name;
    std::unique_ptr<serve::Session> session;
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Request> queue;  // guarded by mutex
    bool done = false;          // guarded by mutex: the worker takes no more requests
    std::thread worker;
};

class Server {
public:
    void dispatch(std::string_view line);
    void write(const Json& reply) { out_.write(reply); }
    void shutdown();

private:
    Output out_;
    std::map<std::string, std::unique_ptr<Slot>> slots_;  // the reader thread's only

    static void work(Slot& slot, Output& out);
    // Queues `r` unless the worker has finished; false then.
    static bool enqueue(Slot& slot, Request r);
    void reap();
};

bool Server::enqueue(Slot& slot, Request r) {
    {
        std::lock_guard<std::mutex> lock(slot.mutex);
        if (slot.done) return false;
        slot.queue.push_back(std::move(r));
    }
    slot.ready.notify_one();
    return true;
}

void Server::work(Slot& slot, Output& out) {
    serve::Session& session = *slot.session;
    while (true) {
        Request r;
        {
            std::unique_lock<std::mutex> lock(slot.mutex);
            slot.ready.wait(lock, [&] { return !slot.queue.empty(); });
            r = std::move(slot.queue.front());
            slot.queue.pop_front();
        }
        Json reply;
        bool broken = false;
        try {
            switch (r.type) {
                case Request::Type::Run:
                    reply = session.start();
                    break;
                case Request::Type::Resume:
                    reply = session.resume(r.resume);
                    break;
                case Request::Type::Abort:
                    reply = session.abortPaused(r.abort.id);
                    break;
            }
        } catch (...) {
            // Nothing of the exception reaches the client: it could carry paths or addresses.
            reply = serve::internalErrorReply(requestId(r), slot.name);
            broken = true;
        }
        bool last = broken || session.finished();
        std::deque<Request> left;
        if (last) {
            // Done before the last reply is out: a client that reacts to it finds the id free.
            std::lock_guard<std::mutex> lock(slot.mutex);
            slot.done = true;
            left.swap(slot.queue);
        }
        if (!reply.is_null()) out.write(reply);
        if (!last) continue;
        // Requests that arrived meanwhile get an answer; an abort was answered by the last reply.
        for (const Request& x : left)
            if (x.type != Request::Type::Abort)
                out.write(serve::errorReply(requestId(x), slot.name, "unknown_session", "the session has ended"));
        return;
    }
}

void Server::reap() {
    for (auto it = slots_.begin(); it != slots_.end();) {
        bool done;
        {
            std::lock_guard<std::mutex> lock(it->second->mutex);
            done = it->second->done;
        }
        if (!done) {
            ++it;
            continue;
        }
        if (it->second->worker.joinable()) it->second->worker.join();
        it = slots_.erase(it);
    }
}

void Server::dispatch(std::string_view line) {
    Json reply;
    std::optional<Request> parsed = serve::parseRequest(line, reply);
    if (!parsed) {
        out_.write(reply);
        return;
    }
    Request& r = *parsed;
    const std::string name = r.type == Request::Type::Run      ? r.run.session
                             : r.type == Request::Type::Resume ? r.resume.session
                                                               : r.abort.session;
    Json id = requestId(r);
    reap();
    auto it = slots_.find(name);
    if (r.type == Request::Type::Run) {
        if (it != slots_.end()) {
            out_.write(serve::errorReply(id, name, "session_busy",
                                         "the session is still running; abort it or wait for its last reply"));
            return;
        }
        if (slots_.size() >= kMaxSessions) {
            out_.write(serve::errorReply(id, name, "too_many_sessions",
                                         fmt::format("this server runs at most {} sessions at once", kMaxSessions)));
            return;
        }
        auto slot = std::make_unique<Slot>();
        slot->name = name;
        slot->session = std::make_unique<serve::Session>(std::move(r.run));
        Request start;  // the session holds the run request; this only says "start"
        start.type = Request::Type::Run;
        start.run.id = id;
        slot->queue.push_back(std::move(start));
        Slot& s = *slot;
        slot->worker = std::thread([&s, this] { work(s, out_); });
        slots_.emplace(name, std::move(slot));
        return;
    }
    if (it == slots_.end()) {
        out_.write(serve::errorReply(id, name, "unknown_session", "no session with this id is running"));
        return;
    }
    if (r.type == Request::Type::Abort) it->second->session->requestAbort();
    if (!enqueue(*it->second, std::move(r)))
        out_.write(serve::errorReply(id, name, "unknown_session", "the session has ended"));
}

// End of input: nobody can resume a paused session any more, so each session ends at its next
// pause (failed, aborted); a running one first finishes its step under its own limits.
void Server::shutdown() {
    for (auto& [name, slot] : slots_) {
        Request abort;
        abort.type = Request::Type::Abort;
        enqueue(*slot, std::move(abort));
    }
    for (auto& [name, slot] : slots_)
        if (slot->worker.joinable()) slot->worker.join();
    slots_.clear();
}

}  // namespace

int serveCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: serve takes no arguments; it reads requests on stdin (docs/serve.md)\n", tool);
        return kUsage;
    }
    std::signal(SIGPIPE, SIG_IGN);  // a client that goes away must not kill the server mid-write
    Server server;
    auto handle = [&](std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank lines are ignored
        try {
            server.dispatch(line);
        } catch (...) {
            server.write(serve::internalErrorReply(nullptr, {}));
        }
    };
    readLines(serve::kMaxRequestBytes, handle, [&] {
        server.write(serve::errorReply(nullptr, {}, "bad_request",
                                       fmt::format("the request line is longer than {} bytes", serve::kMaxRequestBytes)));
    });
    server.shutdown();
    return kOk;
}

}  // namespace remit::cli
