// Adapter processes: see process_adapter.h and docs/adapters.md.
#include "broker/process_adapter.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/files.h"
#include "runtime/json_text.h"

extern char** environ;

namespace remit {

namespace {

using Clock = std::chrono::steady_clock;

// Replies nested deeper than this are refused before parsing (the trace writer and the broker
// recurse over results).
constexpr size_t kMaxReplyDepth = 512;
constexpr std::size_t kReadChunk = 64 * 1024;

AdapterReply failure(const char* code, std::string message) {
    AdapterReply r;
    r.ok = false;
    r.errorCode = code;
    r.message = std::move(message);
    return r;
}

// A short, printable-ASCII excerpt of hostile bytes for messages (which end up in JSON traces).
std::string excerpt(const std::string& s, std::size_t max = 80) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < max; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    }
    if (s.size() > max) out += "...";
    return out;
}

std::string describeStatus(int status) {
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const char* name = sigabbrev_np(WTERMSIG(status));
        return std::string("killed by signal ") + (name ? std::string("SIG") + name : std::to_string(WTERMSIG(status)));
    }
    return "status " + std::to_string(status);
}

// write() that reports EPIPE instead of raising SIGPIPE, without touching the process-wide
// disposition: SIGPIPE is blocked for this thread during the write and a SIGPIPE the write raised
// is consumed before unblocking.
ssize_t writeNoSigpipe(int fd, const char* data, std::size_t size) {
    sigset_t pipeSet, oldMask, pending;
    sigemptyset(&pipeSet);
    sigaddset(&pipeSet, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    const bool wasPending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipeSet, &oldMask);
    ssize_t n = ::write(fd, data, size);
    int savedErrno = errno;
    if (n < 0 && savedErrno == EPIPE && !wasPending) {
        struct timespec zero {};
        while (sigtimedwait(&pipeSet, nullptr, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &oldMask, nullptr);
    errno = savedErrno;
    return n;
}

const char* jsonTypeName(const Json& j) { return j.type_name(); }

bool findOnPath(const std::string& program) {
    // A directory is "executable" to access(2) too; only a regular file can be run.
    if (program.find('/') != std::string::npos) {
        struct stat st {};
        return ::stat(program.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(program.c_str(), X_OK) == 0;
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        std::size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        if (dir.empty()) dir = ".";
        std::string candidate = dir + "/" + program;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
            return true;
        start = end + 1;
    }
    return false;
}

std::string quoteForDisplay(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        if (!out.empty()) out += ' ';
        bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`|;&<>()*?[]#~") == std::string::npos;
        if (plain) {
            out += a;
        } else {
            out += '\'';
            for (char c : a) {
                if (c == '\'') out += "'\\''";
                else out += c;
            }
            out += '\'';
        }
    }
    return out;
}

}  // namespace

AdapterReplyLine parseAdapterReply(std::string_view line, uint64_t id) {
    using Kind = AdapterReplyLine::Kind;
    // Until the id matches, a problem means the stream is out of step; after, the reply is merely
    // invalid (a CapabilityFailed answer naming the problem).
    auto outOfStep = [](std::string message) {
        return AdapterReplyLine{Kind::OutOfStep, failure("CapabilityFailed", std::move(message))};
    };
    auto invalid = [](std::string message) {
        return AdapterReplyLine{Kind::Answer, failure("CapabilityFailed", std::move(message))};
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
        // The parser's message quotes input bytes, which need not be UTF-8: excerpt() both.
        return outOfStep("adapter reply is not valid JSON (" + excerpt(e.what(), 240) +
                         "): " + excerpt(std::string(line)));
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
        return invalid("adapter reply has ok: false but no 'message' string (error " + excerpt(code) + ")");
    std::string message = msgIt->get<std::string>();
    if (code == "CapabilityFailed" || code == "Timeout" || code == "ModelOutputInvalid") {
        reply.errorCode = code;
    } else {
        reply.errorCode = "CapabilityFailed";
        message = "adapter reported unknown error '" + excerpt(code) + "': " + message;
    }
    reply.ok = false;
    reply.message = std::move(message);
    return out;
}

namespace {

class ProcessAdapter final : public Adapter {
public:
    ProcessAdapter(std::vector<std::string> argv, const char* kind, ProcessAdapterOptions options)
        : argv_(std::move(argv)), display_(quoteForDisplay(argv_)), kind_(kind), options_(options) {}

    ~ProcessAdapter() override {
        std::lock_guard<std::mutex> lock(mutex_);
        stop(true);
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
            if (pid_ > 0 && hasExited()) stop(true);
            bool fresh = false;
            if (pid_ <= 0) {
                std::string error;
                if (!start(error)) {
                    AdapterReply r = failure(
                        "CapabilityFailed",
                        round == 0 ? error
                                   : "adapter process exited before replying (" + firstDeath +
                                         "), and could not be started again: " + error);
                    r.delivered = reached;
                    return r;
                }
                fresh = true;
            }
            const uint64_t id = nextId_++;
            std::string line = encode(request, id, timeoutMs);
            auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs) +
                            std::chrono::milliseconds(fresh ? options_.startupGraceMs : 0);
            Outcome outcome = exchange(line, id, deadline, timeoutMs);
            switch (outcome.kind) {
                case Outcome::Replied:
                    return std::move(outcome.reply);
                case Outcome::Broken:  // the process's state is unknown: restart it for the next call
                    stop(false);
                    return std::move(outcome.reply);
                case Outcome::Died: {
                    bool unread = unreadAfterDeath(outcome.written);
                    reached = reached || !unread;
                    std::string how = stop(true);
                    std::string what = outcome.detail + (unread ? ", without reading the request" : "") +
                                       (how.empty() ? "" : ", " + how);
                    if (round == 0) {
                        firstDeath = what;
                        continue;
                    }
                    AdapterReply r = failure("CapabilityFailed", "adapter process exited before replying (" +
                                                                     firstDeath + "), and again after one restart (" +
                                                                     what + ") [" + display_ + "]");
                    r.delivered = reached;
                    return r;
                }
            }
        }
        return failure("CapabilityFailed", "adapter process exited");  // not reached
    }

private:
    struct Outcome {
        enum Kind { Replied, Broken, Died } kind = Replied;
        AdapterReply reply;
        std::string detail;  // Died: what happened ("closed its stdout", "stopped reading its stdin")
        std::size_t written = 0;  // Died: how many bytes of the request went into the process's stdin
    };

    // After a death: whether none of the `written` bytes of this request were read, so the request
    // reached nobody (docs/adapters.md, "Delivered or not"). Nothing written is nothing read.
    // Otherwise the bytes still in the pipe tell (FIONREAD answers on its write end too, and the
    // pipe keeps its bytes while that end is open): all of them there means nobody read any. To
    // make that final, a request that looks unread is measured again after the process group is
    // killed, so nobody can read it in between; a process killed by SIGKILL runs no more of its
    // own code, so bytes taken in by a read already under way are never acted upon. A descendant
    // that left the process group and kept the adapter's stdin is beyond this: it could still read.
    bool unreadAfterDeath(std::size_t written) {
        if (written == 0) return true;
        if (pipeBacklog() != written) return false;
        ::kill(-pid_, SIGKILL);
        waitExited(options_.termGraceMs);
        return pipeBacklog() == written;
    }

    // The bytes written to the process's stdin and not read yet; SIZE_MAX when unknown.
    std::size_t pipeBacklog() const {
        int n = 0;
        if (toChild_ < 0 || ::ioctl(toChild_, FIONREAD, &n) != 0 || n < 0) return SIZE_MAX;
        return static_cast<std::size_t>(n);
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

    bool start(std::string& error) {
        int toChild[2] = {-1, -1}, fromChild[2] = {-1, -1};
        if (::pipe2(toChild, O_CLOEXEC) != 0 || ::pipe2(fromChild, O_CLOEXEC) != 0) {
            error = std::string("cannot start adapter process: pipe: ") + std::strerror(errno);
            for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1]})
                if (fd >= 0) ::close(fd);
            return false;
        }
        // stderr (fd 2) is inherited as is. Before the exec the child changes to the working
        // directory, so a relative program or argument resolves where the run was made.
        pid_t pid = -1;
        int rc = spawnProcess(argv_, ChildFds{toChild[0], fromChild[1], -1}, options_.workingDir, pid);
        ::close(toChild[0]);
        ::close(fromChild[1]);
        if (rc != 0) {
            ::close(toChild[1]);
            ::close(fromChild[0]);
            error = "cannot start adapter process [" + display_ + "]: " + std::strerror(rc);
            return false;
        }
        ::fcntl(toChild[1], F_SETFL, ::fcntl(toChild[1], F_GETFL) | O_NONBLOCK);
        ::fcntl(fromChild[0], F_SETFL, ::fcntl(fromChild[0], F_GETFL) | O_NONBLOCK);
        pid_ = pid;
        toChild_ = toChild[1];
        fromChild_ = fromChild[0];
        inbuf_.clear();
        scanned_ = 0;
        return true;
    }

    // Without reaping: has the child exited?
    bool hasExited() const {
        siginfo_t info;
        std::memset(&info, 0, sizeof info);
        if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
            return errno == ECHILD;
        return info.si_pid == pid_;
    }

    bool waitExited(uint64_t ms) const {
        auto until = Clock::now() + std::chrono::milliseconds(ms);
        for (;;) {
            if (hasExited()) return true;
            if (Clock::now() >= until) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }

    // Stops the child (gently: close its stdin and give it exitGraceMs first), kills what is left
    // of its process group, reaps it, and returns how it ended ("" if unknown).
    std::string stop(bool gently) {
        if (pid_ <= 0) return {};
        if (toChild_ >= 0) ::close(toChild_);
        toChild_ = -1;
        bool exited = gently && waitExited(options_.exitGraceMs);
        if (!exited) {
            ::kill(-pid_, SIGTERM);
            exited = waitExited(options_.termGraceMs);
        }
        // The leader is a zombie (or gone) here, so the group id cannot have been reused.
        ::kill(-pid_, SIGKILL);
        int status = 0;
        std::string how;
        pid_t r;
        do {
            r = ::waitpid(pid_, &status, 0);
        } while (r < 0 && errno == EINTR);
        if (r == pid_) how = describeStatus(status);
        if (!exited && r == pid_ && WIFSIGNALED(status)) how = "did not exit, " + how;
        if (fromChild_ >= 0) ::close(fromChild_);
        fromChild_ = -1;
        pid_ = -1;
        inbuf_.clear();
        scanned_ = 0;
        return how;
    }

    // Takes the next complete line out of inbuf_, if there is one.
    std::optional<std::string> takeLine() {
        std::size_t nl = inbuf_.find('\n', scanned_);
        if (nl == std::string::npos) {
            scanned_ = inbuf_.size();
            return std::nullopt;
        }
        std::string line = inbuf_.substr(0, nl);
        inbuf_.erase(0, nl + 1);
        scanned_ = 0;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
    }

    Outcome broken(std::string message) {
        Outcome o;
        o.kind = Outcome::Broken;
        o.reply = failure("CapabilityFailed", std::move(message));
        return o;
    }

    Outcome exchange(const std::string& request, uint64_t id, Clock::time_point deadline, uint64_t timeoutMs) {
        std::size_t written = 0;
        for (;;) {
            // Replies already buffered first (a stale one from before may precede ours).
            while (auto line = takeLine()) {
                if (line->size() > options_.maxLineBytes) return oversized();
                if (line->find_first_not_of(" \t") == std::string::npos) continue;
                bool stale = false;
                Outcome o = interpret(*line, id, stale);
                if (stale) continue;
                if (o.kind == Outcome::Replied && written < request.size()) {
                    // It answered before reading the whole request: the framing is lost.
                    o.kind = Outcome::Broken;
                }
                return o;
            }
            if (inbuf_.size() > options_.maxLineBytes) return oversized();

            auto now = Clock::now();
            if (now >= deadline) return timedOut(timeoutMs);
            auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
            int waitMs = remaining > INT_MAX ? INT_MAX : static_cast<int>(remaining);

            struct pollfd fds[2];
            nfds_t n = 0;
            int writeSlot = -1;
            if (written < request.size()) {
                fds[n] = {toChild_, POLLOUT, 0};
                writeSlot = static_cast<int>(n++);
            }
            const int readSlot = static_cast<int>(n);
            fds[n++] = {fromChild_, POLLIN, 0};
            int ready = ::poll(fds, n, waitMs);
            if (ready < 0) {
                if (errno == EINTR) continue;
                return broken(std::string("adapter I/O failed: poll: ") + std::strerror(errno));
            }
            if (writeSlot >= 0 && fds[writeSlot].revents != 0) {
                ssize_t w = writeNoSigpipe(toChild_, request.data() + written, request.size() - written);
                if (w > 0) {
                    written += static_cast<std::size_t>(w);
                } else if (w < 0 && errno == EPIPE) {
                    Outcome o;
                    o.kind = Outcome::Died;
                    o.detail = "closed its stdin";
                    o.written = written;
                    return o;
                } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    return broken(std::string("adapter I/O failed: write: ") + std::strerror(errno));
                }
            }
            if (fds[readSlot].revents != 0) {
                // Never hold more than one line's limit plus a chunk.
                char chunk[kReadChunk];
                ssize_t r = ::read(fromChild_, chunk, sizeof chunk);
                if (r > 0) {
                    inbuf_.append(chunk, static_cast<std::size_t>(r));
                } else if (r == 0) {
                    Outcome o;
                    o.kind = Outcome::Died;
                    o.detail = "closed its stdout";
                    o.written = written;
                    return o;
                } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    return broken(std::string("adapter I/O failed: read: ") + std::strerror(errno));
                }
            }
        }
    }

    Outcome oversized() {
        return broken("adapter reply line is longer than " + std::to_string(options_.maxLineBytes) + " bytes");
    }

    Outcome timedOut(uint64_t timeoutMs) {
        Outcome o;
        o.kind = Outcome::Broken;
        o.reply = failure("Timeout", "adapter did not reply within " + std::to_string(timeoutMs) +
                                         " ms; the process was stopped and restarts on the next call [" + display_ + "]");
        return o;
    }

    // Judges one reply line (parseAdapterReply) and says what it means for the process: a reply to
    // an earlier request is skipped, a line out of step restarts the process, an answer (valid or
    // not) keeps it.
    Outcome interpret(const std::string& line, uint64_t id, bool& stale) {
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

    std::vector<std::string> argv_;
    std::string display_;
    const char* kind_;
    ProcessAdapterOptions options_;
    std::mutex mutex_;
    pid_t pid_ = -1;
    int toChild_ = -1;
    int fromChild_ = -1;
    std::string inbuf_;
    std::size_t scanned_ = 0;
    uint64_t nextId_ = 1;
};

}  // namespace

bool splitCommand(const std::string& command, std::vector<std::string>& argv, std::string& error) {
    argv.clear();
    std::string word;
    bool inWord = false;
    std::size_t i = 0;
    const std::size_t n = command.size();
    while (i < n) {
        char c = command[i];
        if (c == ' ' || c == '\t' || c == '\n') {
            if (inWord) argv.push_back(std::move(word));
            word.clear();
            inWord = false;
            ++i;
        } else if (c == '\'') {
            std::size_t close = command.find('\'', i + 1);
            if (close == std::string::npos) {
                error = "unterminated ' quote in adapter command";
                return false;
            }
            word.append(command, i + 1, close - i - 1);
            inWord = true;
            i = close + 1;
        } else if (c == '"') {
            ++i;
            bool closed = false;
            while (i < n) {
                char d = command[i];
                if (d == '"') {
                    closed = true;
                    ++i;
                    break;
                }
                if (d == '\\' && i + 1 < n && std::strchr("\"\\$`", command[i + 1])) {
                    word += command[i + 1];
                    i += 2;
                    continue;
                }
                word += d;
                ++i;
            }
            if (!closed) {
                error = "unterminated \" quote in adapter command";
                return false;
            }
            inWord = true;
        } else if (c == '\\') {
            if (i + 1 >= n) {
                error = "adapter command ends with a lone backslash";
                return false;
            }
            word += command[i + 1];
            inWord = true;
            i += 2;
        } else if (std::strchr("|;&<>()$`", c)) {
            error = std::string("adapter command contains '") + c +
                    "': it is run without a shell; quote the character, or run `sh -c '...'` explicitly";
            return false;
        } else {
            word += c;
            inWord = true;
            ++i;
        }
    }
    if (inWord) argv.push_back(std::move(word));
    if (argv.empty()) {
        error = "the adapter command is empty";
        return false;
    }
    return true;
}

std::unique_ptr<Adapter> makeArgvAdapter(std::vector<std::string> argv, const char* kind,
                                         const ProcessAdapterOptions& options, std::string& error) {
    if (argv.empty() || argv[0].empty()) {
        error = "the adapter command is empty";
        return nullptr;
    }
    // A relative path with a slash names a file in the directory the process will start in.
    std::string program = argv[0];
    if (!options.workingDir.empty() && program.find('/') != std::string::npos && program[0] != '/')
        program = options.workingDir + "/" + program;
    if (!findOnPath(program)) {
        std::string fileKind = argv[0].find('/') == std::string::npos ? "" : nonRegularKind(argv[0]);
        if (!fileKind.empty())
            error = "adapter program '" + argv[0] + "' is " + fileKind + ", not a program";
        else
            error = "adapter program '" + argv[0] + "' not found" +
                    (argv[0].find('/') == std::string::npos ? " on PATH" : " or not executable");
        return nullptr;
    }
    return std::make_unique<ProcessAdapter>(std::move(argv), kind, options);
}

std::unique_ptr<Adapter> makeProcessAdapter(const std::string& command, const ProcessAdapterOptions& options,
                                            std::string& error) {
    std::vector<std::string> argv;
    if (!splitCommand(command, argv, error)) return nullptr;
    return makeArgvAdapter(std::move(argv), "process", options, error);
}

int spawnProcess(const std::vector<std::string>& argv, ChildFds fds, const std::string& workingDir, pid_t& pid) {
    if (argv.empty()) return EINVAL;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (fds.in >= 0) posix_spawn_file_actions_adddup2(&actions, fds.in, STDIN_FILENO);
    if (fds.out >= 0) posix_spawn_file_actions_adddup2(&actions, fds.out, STDOUT_FILENO);
    if (fds.err >= 0) posix_spawn_file_actions_adddup2(&actions, fds.err, STDERR_FILENO);
    // Every other descriptor is closed in the child.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (!workingDir.empty()) posix_spawn_file_actions_addchdir_np(&actions, workingDir.c_str());

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group, so a timeout or shutdown also stops whatever the child started, and a
    // signal to the parent's group does not reach it; no blocked signals; default dispositions for
    // signals the parent may ignore or handle (an ignored SIGPIPE would otherwise be inherited
    // across exec).
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::vector<char*> cargv;
    cargv.reserve(argv.size() + 1);
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    int rc = ::posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc;
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
