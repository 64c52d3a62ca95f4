// Adapter processes: see process_adapter.h and docs/adapters.md.
#include "broker/process_adapter.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <sys/stat.h>
#include <utility>

#include "broker/child_process.h"
#include "runtime/json_text.h"

namespace remit {

namespace {

// Replies nested deeper than this are refused before parsing (the trace writer and the broker
// recurse over results).
constexpr size_t kMaxReplyDepth = 512;

const char* jsonTypeName(const Json& j) { return j.type_name(); }

}  // namespace

AdapterReplyLine parseAdapterReply(std::string_view line, uint64_t id) {
    using Kind = AdapterReplyLine::Kind;
    // Until the id matches, a problem means the stream is out of step; after, the reply is merely
    // invalid (a CapabilityFailed answer naming the problem).
    auto outOfStep = [](std::string message) {
        return AdapterReplyLine{Kind::OutOfStep, AdapterReply::failure("CapabilityFailed", std::move(message))};
    };
    auto invalid = [](std::string message) {
        return AdapterReplyLine{Kind::Answer, AdapterReply::failure("CapabilityFailed", std::move(message))};
    };
    if (jsonNestsDeeperThan(line, kMaxReplyDepth))
        return outOfStep("adapter reply nests deeper than " + std::to_string(kMaxReplyDepth) + " levels");
    // JSON text never holds a raw NUL, and the parser takes one for the end of its input: without
    // this, `{"id": 1, "ok": true, "result": 1}\0junk` would be taken for a reply, the rest unread.
    if (line.find('\0') != std::string_view::npos) return outOfStep("adapter reply contains a NUL byte");
    Json j;
    try {
        j = Json::parse(line);
    } catch (const Json::exception& e) {
        // The parser's message quotes input bytes, which need not be UTF-8: printableExcerpt() both.
        return outOfStep("adapter reply is not valid JSON (" + printableExcerpt(e.what(), 240) +
                         "): " + printableExcerpt(line));
    }
    if (!j.is_object()) return outOfStep(std::string("adapter reply is not a JSON object but ") + jsonTypeName(j));
    auto idIt = j.find("id");
    if (idIt == j.end()) return outOfStep("adapter reply has no 'id'");
    if (idIt->is_number_unsigned()) {
        uint64_t got = idIt->get<uint64_t>();
        if (got >= 1 && got < id) return AdapterReplyLine{Kind::Stale, {}};
        if (got != id)
            return outOfStep("adapter reply has id " + std::to_string(got) + ", expected " + std::to_string(id));
    } else if (idIt->is_number_integer()) {
        return outOfStep("adapter reply has id " + idIt->dump() + ", expected " + std::to_string(id));
    } else {
        return outOfStep(std::string("adapter reply 'id' is not an integer but ") + jsonTypeName(*idIt));
    }
    auto okIt = j.find("ok");
    if (okIt == j.end()) return invalid("adapter reply has no 'ok'");
    if (!okIt->is_boolean())
        return invalid(std::string("adapter reply 'ok' is not a boolean but ") + jsonTypeName(*okIt));

    AdapterReplyLine out;
    AdapterReply& reply = out.reply;
    if (okIt->get<bool>()) {
        auto resultIt = j.find("result");
        if (resultIt == j.end()) return invalid("adapter reply has ok: true but no 'result'");
        reply.ok = true;
        reply.result = std::move(*resultIt);
        auto costIt = j.find("cost_usd");
        if (costIt != j.end() && !costIt->is_null()) {
            if (!costIt->is_number()) return invalid("adapter reply 'cost_usd' is not a number");
            double cost = costIt->get<double>();
            if (!std::isfinite(cost) || cost < 0)
                return invalid("adapter reply 'cost_usd' is not a finite non-negative number");
            reply.costUsd = cost;
        }
        auto metaIt = j.find("meta");
        if (metaIt != j.end() && !metaIt->is_null()) {
            if (!metaIt->is_object()) return invalid("adapter reply 'meta' is not an object");
            reply.meta = std::move(*metaIt);
        }
        return out;
    }
    auto errIt = j.find("error");
    if (errIt == j.end()) return invalid("adapter reply has ok: false but no 'error'");
    if (!errIt->is_string()) return invalid("adapter reply 'error' is not a string");
    const std::string code = errIt->get<std::string>();
    auto msgIt = j.find("message");
    if (msgIt == j.end() || !msgIt->is_string())
        return invalid("adapter reply has ok: false but no 'message' string (error " + printableExcerpt(code) + ")");
    std::string message = msgIt->get<std::string>();
    if (code == "CapabilityFailed" || code == "Timeout" || code == "ModelOutputInvalid") {
        reply.errorCode = code;
    } else {
        reply.errorCode = "CapabilityFailed";
        message = "adapter reported unknown error '" + printableExcerpt(code) + "': " + message;
    }
    reply.ok = false;
    reply.message = std::move(message);
    return out;
}

namespace {

class ProcessAdapter final : public Adapter {
public:
    ProcessAdapter(std::vector<std::string> argv, const char* kind, const ProcessAdapterOptions& options)
        : child_(std::move(argv), childOptions(options)), kind_(kind), options_(options) {}

    ~ProcessAdapter() override {
        std::lock_guard<std::mutex> lock(mutex_);
        child_.stop(true);
    }

    ProcessAdapter(const ProcessAdapter&) = delete;
    ProcessAdapter& operator=(const ProcessAdapter&) = delete;

    const char* kind() const override { return kind_; }

    AdapterReply perform(const AdapterRequest& request) override {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t timeoutMs = request.timeoutMs ? request.timeoutMs : options_.defaultTimeoutMs;
        std::string firstDeath;
        // Whether a process of this attempt read some of its request (and so may have acted on it):
        // until one did, a failure is "not delivered" (AdapterReply::delivered).
        bool reached = false;
        for (int round = 0; round < 2; ++round) {
            // A process that exited since the last call (a one-shot adapter, say) is simply started
            // again; only a death during this attempt uses up the attempt's one restart.
            if (child_.running() && child_.hasExited()) child_.stop(true);
            bool fresh = false;
            if (!child_.running()) {
                std::string error;
                if (!child_.start(error)) {
                    error = "cannot start adapter process [" + child_.display() + "]: " + error;
                    AdapterReply r = AdapterReply::failure(
                        "CapabilityFailed", round == 0 ? error
                                                       : "adapter process exited before replying (" + firstDeath +
                                                             "), and could not be started again: " + error);
                    r.delivered = reached;
                    return r;
                }
                fresh = true;
            }
            const uint64_t id = nextId_++;
            const std::string line = encode(request, id, timeoutMs);
            child_.send(line);
            auto deadline = ChildProcess::Clock::now() + std::chrono::milliseconds(timeoutMs) +
                            std::chrono::milliseconds(fresh ? options_.startupGraceMs : 0);
            Outcome outcome = exchange(id, deadline, timeoutMs);
            switch (outcome.kind) {
                case Outcome::Replied:
                    return std::move(outcome.reply);
                case Outcome::Broken:  // the process's state is unknown: restart it for the next call
                    child_.stop(false);
                    return std::move(outcome.reply);
                case Outcome::Died: {
                    // Nothing was queued before this request (start() and stop() empty the queue),
                    // so what left the queue is what of it went into the process's stdin.
                    bool unread = child_.stdinUnread(line.size() - child_.unsent());
                    reached = reached || !unread;
                    std::string how = child_.stop(true);
                    std::string what = outcome.detail + (unread ? ", without reading the request" : "") +
                                       (how.empty() ? "" : ", " + how);
                    if (round == 0) {
                        firstDeath = what;
                        continue;
                    }
                    AdapterReply r = AdapterReply::failure("CapabilityFailed",
                                                           "adapter process exited before replying (" + firstDeath +
                                                               "), and again after one restart (" + what + ") [" +
                                                               child_.display() + "]");
                    r.delivered = reached;
                    return r;
                }
            }
        }
        return AdapterReply::failure("CapabilityFailed", "adapter process exited");  // not reached
    }

private:
    struct Outcome {
        enum Kind { Replied, Broken, Died } kind = Replied;
        AdapterReply reply;
        std::string detail;  // Died: what happened ("closed its stdout", "stopped reading its stdin")
    };

    static ChildProcessOptions childOptions(const ProcessAdapterOptions& options) {
        ChildProcessOptions out;
        out.workingDir = options.workingDir;
        out.exitGraceMs = options.exitGraceMs;
        out.termGraceMs = options.termGraceMs;
        return out;
    }

    static std::string encode(const AdapterRequest& r, uint64_t id, uint64_t timeoutMs) {
        Json j;
        j["id"] = id;
        if (r.kind == AdapterRequest::Kind::Call) {
            j["type"] = "call";
            j["resource"] = r.resource;
            j["args"] = r.args.is_null() ? Json::object() : r.args;
            j["arg_tags"] = r.argTags.is_object() ? r.argTags : Json::object();
        } else {
            j["type"] = "ask";
            j["model"] = r.model;
            j["agent"] = r.agent.empty() ? Json(nullptr) : Json(r.agent);
            j["system"] = r.system.empty() ? Json(nullptr) : Json(r.system);
            j["prompt"] = r.prompt;
            j["context"] = r.context;
            j["rendered_prompt"] = r.renderedPrompt;
            j["schema"] = r.schema;
            j["type_name"] = r.typeName;
            j["arg_tags"] = r.argTags.is_object() ? r.argTags : Json::object();
            j["previous"] = r.previous ? Json{{"answer", r.previous->answer}, {"error", r.previous->error}} : Json(nullptr);
        }
        j["idempotency_key"] = r.idempotencyKey;
        j["timeout_ms"] = timeoutMs;
        j["run_id"] = r.runId;
        // Added after the first version of the protocol (docs/adapters.md): older adapters ignore them.
        j["site"] = r.site;
        j["attempt"] = r.attempt;
        j["pc_tags"] = r.pcTags.is_array() ? r.pcTags : Json::array();
        // Compact output never contains a raw newline; invalid UTF-8 is replaced, not thrown.
        std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
        line += '\n';
        return line;
    }

    static Outcome broken(std::string message) {
        Outcome o;
        o.kind = Outcome::Broken;
        o.reply = AdapterReply::failure("CapabilityFailed", std::move(message));
        return o;
    }

    static Outcome died(std::string detail) {
        Outcome o;
        o.kind = Outcome::Died;
        o.detail = std::move(detail);
        return o;
    }

    Outcome exchange(uint64_t id, ChildProcess::Clock::time_point deadline, uint64_t timeoutMs) {
        using Io = ChildProcess::Io;
        for (;;) {
            Io io = child_.next(deadline, options_.maxLineBytes);
            switch (io.kind) {
                case Io::Kind::Line: break;
                case Io::Kind::Timeout: return timedOut(timeoutMs);
                case Io::Kind::StdoutClosed: return died("closed its stdout");
                case Io::Kind::StdinClosed: return died("closed its stdin");
                case Io::Kind::Oversized:
                    return broken("adapter reply line is longer than " + std::to_string(options_.maxLineBytes) +
                                  " bytes");
                case Io::Kind::Failed: return broken("adapter I/O failed: " + io.error);
            }
            if (io.line.find_first_not_of(" \t") == std::string::npos) continue;
            bool stale = false;
            Outcome o = interpret(io.line, id, stale);
            if (stale) continue;
            // It answered before reading the whole request: the framing is lost.
            if (o.kind == Outcome::Replied && child_.unsent() > 0) o.kind = Outcome::Broken;
            return o;
        }
    }

    Outcome timedOut(uint64_t timeoutMs) {
        Outcome o;
        o.kind = Outcome::Broken;
        o.reply = AdapterReply::failure("Timeout", "adapter did not reply within " + std::to_string(timeoutMs) +
                                         " ms; the process was stopped and restarts on the next call [" +
                                         child_.display() + "]");
        return o;
    }

    // Judges one reply line (parseAdapterReply) and says what it means for the process: a reply to
    // an earlier request is skipped, a line out of step restarts the process, an answer (valid or
    // not) keeps it.
    static Outcome interpret(const std::string& line, uint64_t id, bool& stale) {
        AdapterReplyLine judged = parseAdapterReply(line, id);
        Outcome o;
        switch (judged.kind) {
            case AdapterReplyLine::Kind::Stale:
                stale = true;
                return o;
            case AdapterReplyLine::Kind::OutOfStep:
                o.kind = Outcome::Broken;
                break;
            case AdapterReplyLine::Kind::Answer:
                o.kind = Outcome::Replied;
                break;
        }
        o.reply = std::move(judged.reply);
        return o;
    }

    ChildProcess child_;
    const char* kind_;
    ProcessAdapterOptions options_;
    std::mutex mutex_;
    uint64_t nextId_ = 1;
};

}  // namespace

std::unique_ptr<Adapter> makeArgvAdapter(std::vector<std::string> argv, const char* kind,
                                         const ProcessAdapterOptions& options, std::string& error) {
    if (!checkProgram(argv, options.workingDir, "adapter", error)) return nullptr;
    return std::make_unique<ProcessAdapter>(std::move(argv), kind, options);
}

std::unique_ptr<Adapter> makeProcessAdapter(const std::string& command, const ProcessAdapterOptions& options,
                                            std::string& error) {
    std::vector<std::string> argv;
    if (!splitCommand(command, argv, error)) return nullptr;
    return makeArgvAdapter(std::move(argv), "process", options, error);
}

std::unique_ptr<Adapter> makeProcessAdapter(const std::string& command, std::string& error) {
    return makeProcessAdapter(command, ProcessAdapterOptions{}, error);
}

std::unique_ptr<Adapter> makeLiveAdapter(const std::string& shimPath, const std::string& appDir,
                                         const ProcessAdapterOptions& options, std::string& error) {
    struct stat st {};
    if (::stat(shimPath.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        error = "the live adapter shim '" + shimPath + "' is missing";
        return nullptr;
    }
    if (::stat(appDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        error = "the app folder '" + appDir + "' is not a directory";
        return nullptr;
    }
    return makeArgvAdapter({"python3", shimPath, "--app-dir", appDir}, "live", options, error);
}

std::unique_ptr<Adapter> makeLiveAdapter(const std::string& shimPath, const std::string& appDir, std::string& error) {
    return makeLiveAdapter(shimPath, appDir, ProcessAdapterOptions{}, error);
}

}  // namespace remit
