// remit_bench_load: the load driver of issue #16 ("Load, measured"; docs/testing.md, "Load"). It
// starts the real `remitvm` binary itself and drives it the way many agents and hosts would, for a
// bounded time per scenario:
//
//   mcp         64 keyed clients (one API key each), each on one keep-alive HTTP connection from a
//               loopback address of its own, repeating a realistic MCP session: initialize and
//               remit_examples once, then tools/list, remit_check, remit_run of examples/hello on
//               its fixtures, and a remit_run that pauses for an approval and its remit_resume.
//   mcp+idle    the same, while an attacker on addresses of its own holds idle connections (never
//               sending a byte) and slowloris connections (a header byte a second), reopening
//               every one the server closes.
//   mcp+shared  the same attacker, from the clients' own addresses (as behind a NAT).
//   serve       `remitvm serve` with 63 well-behaved sessions doing run → host-call → resume
//               cycles and one misbehaving session (garbage and oversized lines, unknown fields,
//               runaway programs stopped by their step limit, a call it never resumes, abort
//               storms, requests for calls and sessions that do not exist): 64 sessions in all,
//               the server's limit.
//
// It reports, per scenario and per operation, throughput and latency percentiles of the
// well-behaved clients, their errors by kind, what the attacker achieved, and the server's
// descriptors, threads and memory before and after. Timing is never judged. The verdict is about
// correctness only: the exit status is 1 when a well-behaved client was locked out (a 503 after
// the server's busy wait, a refused connection, a timeout; for serve, too_many_sessions or
// session_busy), got any other error or a wrong answer, when the server crashed or did not exit
// cleanly, or when it kept descriptors after every client had gone.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/hash.h"

extern char** environ;

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kScenarioNames[] = {"mcp", "mcp+idle", "mcp+shared", "serve"};

// serve's bound on sessions at once (docs/serve.md, "Sessions"): 63 well-behaved sessions and the
// misbehaving one fill it exactly, so a session refused for want of room is a lock-out.
constexpr size_t kServeMaxSessions = 64;
// A well-behaved client waits this long for an answer before it counts a timeout (a lock-out):
// longer than the server's 2 s busy wait and than any answer of a healthy server, shorter than
// its 30 s request timeout.
constexpr auto kAnswerTimeout = std::chrono::seconds(15);

struct Options {
    std::string remitvm = REMIT_LOAD_DEFAULT_REMITVM;
    double seconds = 60;
    std::vector<std::string> scenarios{std::begin(kScenarioNames), std::end(kScenarioNames)};
    size_t clients = 64;
    // The attacker tries to hold more connections than the server's bound on open connections
    // (1024, docs/mcp.md): from one address of its own per kind in mcp+idle, where the per-address
    // bound (256) contains it; spread over the clients' addresses in mcp+shared, where it floods
    // the whole bound.
    size_t idle = 1024;            // the attacker's idle connections
    size_t slowloris = 512;        // the attacker's slowloris connections
    size_t attackerAddresses = 1;  // own addresses per attack kind, in mcp+idle
    bool usage = true;             // meter every request in a usage.sqlite, as a hosted server does
    std::string jsonPath;          // "" none, "-" stdout
};

void usage(std::FILE* to) {
    fmt::print(to,
               "usage: remit_bench_load [--remitvm PATH] [--seconds N] [--scenarios {}] [--clients N]\n"
               "                        [--idle N] [--slowloris N] [--attacker-addresses N] [--no-usage]\n"
               "                        [--json PATH|-]\n"
               "Drives a real remitvm under load (docs/testing.md, \"Load\"); exit 1 when a well-behaved client\n"
               "was locked out or failed, or the server crashed or leaked; 2 on a bad flag or a server that\n"
               "does not start.\n",
               fmt::join(kScenarioNames, ","));
}

double msSince(Clock::time_point start, Clock::time_point end = Clock::now()) {
    return std::chrono::duration<double, std::milli>(end - start).count();
}

// The member at `path`, or null when the document does not have that shape: the server under test
// may answer anything, and a wrong shape is an error to count, never a crash of the driver.
const Json& memberAt(const Json& j, std::initializer_list<const char*> path) {
    static const Json absent;
    const Json* at = &j;
    for (const char* key : path) {
        if (!at->is_object()) return absent;
        auto it = at->find(key);
        if (it == at->end()) return absent;
        at = &*it;
    }
    return *at;
}
std::string stringAt(const Json& j, std::initializer_list<const char*> path) {
    const Json& v = memberAt(j, path);
    return v.is_string() ? v.get<std::string>() : std::string();
}
bool boolAt(const Json& j, std::initializer_list<const char*> path, bool otherwise) {
    const Json& v = memberAt(j, path);
    return v.is_boolean() ? v.get<bool>() : otherwise;
}

// ---------------------------------------------------------------- measurements

// What one kind of request did: latencies of the answered ones (ms), failures by kind.
struct OpStats {
    std::vector<float> latencies;
    std::map<std::string, uint64_t> errors;
    uint64_t lockouts = 0;

    void merge(const OpStats& o) {
        latencies.insert(latencies.end(), o.latencies.begin(), o.latencies.end());
        for (const auto& [kind, n] : o.errors) errors[kind] += n;
        lockouts += o.lockouts;
    }
    uint64_t errorCount() const {
        uint64_t n = 0;
        for (const auto& [kind, count] : errors) n += count;
        return n;
    }
};
using OpTable = std::map<std::string, OpStats>;

void mergeOps(OpTable& into, const OpTable& from) {
    for (const auto& [name, stats] : from) into[name].merge(stats);
}

struct Percentiles {
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Percentiles percentiles(std::vector<float> v) {
    Percentiles p;
    if (v.empty()) return p;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return double(v[std::min(v.size() - 1, size_t(q * double(v.size())))]); };
    p.p50 = at(0.50);
    p.p90 = at(0.90);
    p.p99 = at(0.99);
    p.max = v.back();
    return p;
}

// The server as /proc shows it: resident memory (now and peak), threads, open descriptors.
struct ProcSample {
    long rssKb = 0, peakKb = 0, threads = 0, fds = 0;
};

ProcSample sampleProcess(pid_t pid) {
    ProcSample s;
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    std::string line;
    while (std::getline(status, line)) {
        std::istringstream in(line);
        std::string key;
        long value = 0;
        in >> key >> value;
        if (key == "VmRSS:") s.rssKb = value;
        if (key == "VmHWM:") s.peakKb = value;
        if (key == "Threads:") s.threads = value;
    }
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++s.fds;
    return s;
}

// Where the machine's CPU time went during a scenario: the server, this driver (its clients and
// attacker), and everything else — the neighbours of a shared machine, which move every figure.
struct CpuTicks {
    uint64_t total = 0, idle = 0, server = 0, driver = 0;
};

uint64_t processTicks(const std::string& statPath) {
    std::ifstream in(statPath);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t end = text.rfind(')');  // the command name may hold spaces
    if (end == std::string::npos) return 0;
    std::istringstream fields(text.substr(end + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; fields >> field; ++i) {  // field 3 is the state; 14 and 15 the user and system time
        if (i == 14) utime = std::stoull(field);
        if (i == 15) {
            stime = std::stoull(field);
            break;
        }
    }
    return utime + stime;
}

CpuTicks cpuTicks(pid_t server) {
    CpuTicks t;
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    for (int i = 0; i < 8; ++i) {  // user nice system idle iowait irq softirq steal
        uint64_t v = 0;
        in >> v;
        t.total += v;
        if (i == 3 || i == 4) t.idle += v;
    }
    t.server = processTicks(fmt::format("/proc/{}/stat", server));
    t.driver = processTicks("/proc/self/stat");
    return t;
}

struct CpuShare {
    double server = 0, driver = 0, others = 0;  // fractions of the whole machine (every core)
};

CpuShare cpuShare(const CpuTicks& a, const CpuTicks& b) {
    CpuShare share;
    double total = double(b.total - a.total);
    if (total <= 0) return share;
    double busy = total - double(b.idle - a.idle);
    share.server = double(b.server - a.server) / total;
    share.driver = double(b.driver - a.driver) / total;
    share.others = std::max(0.0, busy / total - share.server - share.driver);
    return share;
}

Json sampleJson(const ProcSample& s) {
    return Json{{"rss_kb", s.rssKb}, {"peak_rss_kb", s.peakKb}, {"threads", s.threads}, {"fds", s.fds}};
}

// ---------------------------------------------------------------- the server process

class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "remit-load-XXXXXX").string();
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary directory");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// `remitvm` as a child process, its stdin and stdout optionally piped to us, its stderr always
// (drained by a thread, so the server never blocks on it; the tail is kept for the report).
class ServerProcess {
public:
    ServerProcess(const std::vector<std::string>& argv, bool pipeStdio) {
        int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2];
        if (::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
        if (pipeStdio && (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0))
            throw std::runtime_error("pipe");
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        if (pipeStdio) {
            posix_spawn_file_actions_adddup2(&actions, in[0], 0);
            posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        }
        posix_spawn_file_actions_adddup2(&actions, err[1], 2);
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        int rc = ::posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(err[1]);
        if (pipeStdio) {
            ::close(in[0]);
            ::close(out[1]);
            stdin_ = in[1];
            stdout_ = out[0];
        }
        if (rc != 0) {
            ::close(err[0]);
            throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
        }
        stderrThread_ = std::thread([this, fd = err[0]] { drainStderr(fd); });
    }
    ~ServerProcess() {
        if (!exited()) {
            ::kill(pid_, SIGKILL);
            waitExit(std::chrono::seconds(10));
        }
        closeStdin();
        if (stdout_ >= 0) ::close(stdout_);
        if (stderrThread_.joinable()) stderrThread_.join();
    }
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    pid_t pid() const { return pid_; }
    int stdinFd() const { return stdin_; }
    int stdoutFd() const { return stdout_; }
    void closeStdin() {
        if (stdin_ >= 0) ::close(stdin_);
        stdin_ = -1;
    }

    // The port of the `… listening on http://HOST:PORT/mcp` line, or nullopt when the server ends
    // or says nothing of the kind within `timeout`.
    std::optional<uint16_t> waitForPort(std::chrono::seconds timeout) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait_for(lock, timeout, [&] { return port_ || stderrEnded_; });
        return port_;
    }

    bool exited() {
        if (status_) return true;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
        return status_.has_value();
    }
    bool waitExit(std::chrono::milliseconds timeout) {
        auto deadline = Clock::now() + timeout;
        while (!exited()) {
            if (Clock::now() >= deadline) return false;
            std::this_thread::sleep_for(milliseconds(10));
        }
        return true;
    }
    // "exit 0", "exit 3", "signal 11 (Segmentation fault)", "running".
    std::string exitText() {
        if (!exited()) return "running";
        if (WIFEXITED(*status_)) return fmt::format("exit {}", WEXITSTATUS(*status_));
        return fmt::format("signal {} ({})", WTERMSIG(*status_), ::strsignal(WTERMSIG(*status_)));
    }
    bool cleanExit() { return exited() && WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0; }
    std::string stderrTail() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stderr_;
    }

private:
    pid_t pid_ = -1;
    int stdin_ = -1, stdout_ = -1;
    std::optional<int> status_;
    std::thread stderrThread_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::optional<uint16_t> port_;  // guarded
    bool stderrEnded_ = false;      // guarded
    std::string stderr_;            // guarded: the last 16 KiB

    void drainStderr(int fd) {
        char chunk[4096];
        for (;;) {
            ssize_t n = ::read(fd, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            std::lock_guard<std::mutex> lock(mutex_);
            stderr_.append(chunk, size_t(n));
            if (!port_) {
                size_t at = stderr_.find("listening on http://");
                size_t end = at == std::string::npos ? at : stderr_.find("/mcp", at);
                size_t colon = end == std::string::npos ? end : stderr_.rfind(':', end);
                if (colon != std::string::npos && colon > at)
                    port_ = uint16_t(std::stoul(stderr_.substr(colon + 1, end - colon - 1)));
                changed_.notify_all();
            }
            if (stderr_.size() > 16384) stderr_.erase(0, stderr_.size() - 16384);
        }
        ::close(fd);
        std::lock_guard<std::mutex> lock(mutex_);
        stderrEnded_ = true;
        changed_.notify_all();
    }
};

// Waits until the server's descriptors are back to `baseline` (every client gone) or `timeout`
// passes; returns the last sample.
ProcSample settle(pid_t pid, long baselineFds, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    ProcSample s = sampleProcess(pid);
    while (s.fds > baselineFds && Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(100));
        s = sampleProcess(pid);
    }
    return s;
}

// ---------------------------------------------------------------- HTTP over loopback

in_addr loopback(uint32_t hostOrder) {
    in_addr a{};
    a.s_addr = htonl(hostOrder);
    return a;
}
// 127.0.0.1 is the server's; clients use 127.0.0.2 on, the attacker 127.0.1.x and 127.0.2.x.
in_addr clientAddress(size_t i) { return loopback(0x7f000002u + uint32_t(i)); }
in_addr idleAddress(size_t i) { return loopback(0x7f000101u + uint32_t(i)); }
in_addr slowAddress(size_t i) { return loopback(0x7f000201u + uint32_t(i)); }

// A non-blocking TCP socket bound to `source` and connecting to 127.0.0.1:port; -1 with errno.
int startConnect(in_addr source, uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    // The local port is then picked at connect(), knowing the destination, so thousands of
    // reconnections from one address do not run out of ports.
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr = source;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr = loopback(0x7f000001u);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

struct HttpReply {
    std::string failure;   // empty when a whole response arrived; else the kind of failure
    bool lockout = false;  // the failure is one a client cannot get past: refused, or no answer
    int status = 0;
    std::map<std::string, std::string> headers;  // names in lower case
    std::string body;
};

// One client's keep-alive connection. A request is sent whole, the response read by its
// Content-Length; a `Connection: close` response or any failure drops the connection, and the next
// request opens a new one (counted as a reconnection).
class HttpConnection {
public:
    HttpConnection(in_addr source, uint16_t port) : source_(source), port_(port) {}
    ~HttpConnection() { drop(); }
    HttpConnection(const HttpConnection&) = delete;
    HttpConnection& operator=(const HttpConnection&) = delete;

    uint64_t connects = 0;
    std::vector<float> connectMs;  // how long each connection took to open

    HttpReply post(const std::string& head, const std::string& body) {
        HttpReply reply;
        auto deadline = Clock::now() + kAnswerTimeout;
        if (fd_ < 0 && !open(deadline, reply)) return reply;
        std::string bytes = head + fmt::format("Content-Length: {}\r\n\r\n", body.size()) + body;
        if (!sendAll(bytes, deadline, reply) || !receive(deadline, reply)) {
            drop();
            return reply;
        }
        auto connection = reply.headers.find("connection");
        if (connection != reply.headers.end() && connection->second.find("close") != std::string::npos) drop();
        return reply;
    }

private:
    in_addr source_;
    uint16_t port_;
    int fd_ = -1;
    std::string in_;

    void drop() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        in_.clear();
    }
    bool fail(HttpReply& r, std::string kind, bool lockout) {
        r.failure = std::move(kind);
        r.lockout = lockout;
        return false;
    }
    // Polls for `events` until the deadline: false on a timeout.
    bool await(short events, Clock::time_point deadline) {
        for (;;) {
            auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return false;
            pollfd p{fd_, events, 0};
            int n = ::poll(&p, 1, int(left));
            if (n > 0) return true;
            if (n < 0 && errno != EINTR) return true;  // the next call reports the error
        }
    }
    bool open(Clock::time_point deadline, HttpReply& r) {
        auto started = Clock::now();
        fd_ = startConnect(source_, port_);
        if (fd_ < 0) return fail(r, fmt::format("connect: {}", std::strerror(errno)), errno == ECONNREFUSED);
        if (!await(POLLOUT, deadline)) {
            drop();
            return fail(r, "connect timeout", true);
        }
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
            drop();
            return fail(r,
                        error == ECONNREFUSED ? "connection refused" : fmt::format("connect: {}", std::strerror(error)),
                        error == ECONNREFUSED);
        }
        ++connects;
        connectMs.push_back(float(msSince(started)));
        return true;
    }
    bool sendAll(std::string_view bytes, Clock::time_point deadline, HttpReply& r) {
        while (!bytes.empty()) {
            ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n > 0) {
                bytes.remove_prefix(size_t(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                if (!await(POLLOUT, deadline)) return fail(r, "response timeout", true);
                continue;
            }
            return fail(r, "connection reset", false);
        }
        return true;
    }
    bool fill(Clock::time_point deadline, HttpReply& r) {
        char chunk[65536];
        for (;;) {
            ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
            if (n > 0) {
                in_.append(chunk, size_t(n));
                return true;
            }
            if (n == 0) return fail(r, in_.empty() ? "closed without a response" : "connection reset", false);
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return fail(r, "connection reset", false);
            if (!await(POLLIN, deadline)) return fail(r, "response timeout", true);
        }
    }
    bool receive(Clock::time_point deadline, HttpReply& r) {
        size_t headEnd;
        while ((headEnd = in_.find("\r\n\r\n")) == std::string::npos)
            if (!fill(deadline, r)) return false;
        std::string_view head(in_.data(), headEnd);
        if (!head.starts_with("HTTP/1.1 ") || head.size() < 12) return fail(r, "malformed response", false);
        r.status = std::atoi(std::string(head.substr(9, 3)).c_str());
        size_t at = head.find("\r\n");
        while (at != std::string_view::npos && at < head.size()) {
            size_t next = head.find("\r\n", at + 2);
            std::string_view line = head.substr(at + 2, next == std::string_view::npos ? next : next - at - 2);
            size_t colon = line.find(':');
            if (colon != std::string_view::npos) {
                std::string name(line.substr(0, colon));
                for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
                std::string_view value = line.substr(colon + 1);
                while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
                std::string v(value);
                for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
                r.headers[name] = name == "mcp-session-id" ? std::string(value) : v;
            }
            at = next;
        }
        size_t length = 0;
        if (auto cl = r.headers.find("content-length"); cl != r.headers.end())
            length = std::strtoul(cl->second.c_str(), nullptr, 10);
        size_t total = headEnd + 4 + length;
        while (in_.size() < total)
            if (!fill(deadline, r)) return false;
        r.body = in_.substr(headEnd + 4, length);
        in_.erase(0, total);
        return true;
    }
};

// ---------------------------------------------------------------- the MCP clients

// The docs/mcp.md transcript's program: it reads a note and mails it, and since the note is
// untrusted the mail needs an approval, so remit_run pauses and remit_resume completes it.
constexpr const char* kForwardProgram =
    "program forward\nuses files.read, mail.send\n\nfn main(path: Str) -> Str {\n  let text = files.read(path)\n"
    "  mail.send(to: \"ops@example.com\", body: text)\n  return \"sent {len(text)} characters\"\n}\n";
constexpr const char* kForwardHost =
    "capability files.read(path: Str) -> Str\n  tags untrusted\n  idempotent\n\n"
    "capability mail.send(to: Str deny untrusted, body: Str approve untrusted)\n\ninput path tags untrusted\n";

struct ClientResult {
    OpTable ops;
    uint64_t connects = 0;
    std::vector<float> connectMs;
    std::vector<std::string> firstAnswers;  // remit_check and hello's run, to compare across clients
};

// One keyed agent: its own API key and source address, one connection, requests one after another.
class McpClient {
public:
    McpClient(size_t index, std::string token, in_addr source, uint16_t port, const std::atomic<bool>& stop)
        : index_(index), token_(std::move(token)), port_(port), connection_(source, port), stop_(stop) {}

    ClientResult run() {
        // Until initialize succeeds nothing else makes sense; it is retried like any request.
        // A failed request has waited before it returns (see call), so these loops do not spin.
        while (!stop_ && !initialize()) {
        }
        std::optional<Json> hello;
        while (!stop_ && !(hello = examples())) {
        }
        std::string checkAnswer, runAnswer;
        for (uint64_t cycle = 0; !stop_; ++cycle) {
            call("tools/list", "tools/list", Json::object(), [](const Json& result) {
                const Json& tools = memberAt(result, {"tools"});
                return tools.is_array() && tools.size() == 8 ? std::string()
                                                             : "tools/list did not list the eight tools";
            });
            if (stop_) break;
            tool("remit_check",
                 {{"program", memberAt(*hello, {"hello.rmt"})},
                  {"host", memberAt(*hello, {"host.rmti"})},
                  {"policy", memberAt(*hello, {"policy.toml"})}},
                 [&](const Json& text) {
                     return same(checkAnswer, text, boolAt(text, {"ok"}, false), "the check failed");
                 });
            if (stop_) break;
            tool(
                "remit_run (completes)",
                {{"program", memberAt(*hello, {"hello.rmt"})},
                 {"host", memberAt(*hello, {"host.rmti"})},
                 {"policy", memberAt(*hello, {"policy.toml"})},
                 {"fixtures", memberAt(*hello, {"fixtures/run.json"})},
                 {"inputs", Json{{"topic", "otters"}}}},
                [&](const Json& text) {
                    return same(runAnswer, text, stringAt(text, {"status"}) == "completed", "hello did not complete");
                },
                "remit_run");
            if (stop_) break;
            forwardCycle(cycle);
        }
        result_.connects = connection_.connects;
        result_.connectMs = connection_.connectMs;
        result_.firstAnswers = {checkAnswer, runAnswer};
        return std::move(result_);
    }

private:
    size_t index_;
    std::string token_;
    uint16_t port_;
    HttpConnection connection_;
    const std::atomic<bool>& stop_;
    std::string session_;
    int64_t nextId_ = 1;
    ClientResult result_;

    std::string head() const {
        std::string h = fmt::format(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n",
            port_, token_);
        if (!session_.empty()) h += fmt::format("Mcp-Session-Id: {}\r\n", session_);
        return h;
    }

    // Sends one JSON-RPC request and checks the answer with `check` (an empty string: right; else
    // what is wrong). Records the latency of an answered request, or the failure. Returns the
    // result when the answer was right.
    std::optional<Json> call(const std::string& op, const std::string& method, const Json& params,
                             const std::function<std::string(const Json&)>& check) {
        Json message{{"jsonrpc", "2.0"}, {"id", nextId_++}, {"method", method}, {"params", params}};
        OpStats& stats = result_.ops[op];
        auto started = Clock::now();
        HttpReply reply = connection_.post(head(), message.dump());
        double elapsed = msSince(started);
        // A failed request waits before the next, as a real client would: 1 s after a 503 (its
        // Retry-After), a moment after anything else, so a broken server is not hammered.
        auto failed = [&](std::string kind, bool lockout, milliseconds wait = milliseconds(100)) {
            ++stats.errors[kind];
            if (lockout) ++stats.lockouts;
            std::this_thread::sleep_for(wait);
            return std::nullopt;
        };
        if (!reply.failure.empty()) return failed(reply.failure, reply.lockout);
        // The server's answer after its busy wait (or when metering fails): a lock-out.
        if (reply.status == 503) return failed("http 503", true, milliseconds(1000));
        if (reply.status != 200) return failed(fmt::format("http {}", reply.status), false);
        Json answer = Json::parse(reply.body, nullptr, false);
        if (answer.is_discarded() || !answer.is_object()) return failed("malformed JSON-RPC answer", false);
        if (answer.contains("error"))
            return failed(fmt::format("json-rpc error {}", memberAt(answer, {"error", "code"}).dump()), false);
        if (memberAt(answer, {"id"}) != message["id"]) return failed("answer to another request", false);
        const Json& result = memberAt(answer, {"result"});
        if (std::string wrong = check(result); !wrong.empty()) return failed("wrong answer: " + wrong, false);
        stats.latencies.push_back(float(elapsed));
        if (method == "initialize") {
            auto id = reply.headers.find("mcp-session-id");
            if (id != reply.headers.end()) session_ = id->second;
        }
        return result;
    }

    // A tools/call whose text content is JSON; `check` sees that JSON.
    std::optional<Json> tool(const std::string& op, const Json& arguments,
                             const std::function<std::string(const Json&)>& check, std::string name = "") {
        if (name.empty()) name = op;
        std::optional<Json> text;
        call(op, "tools/call", {{"name", name}, {"arguments", arguments}}, [&](const Json& result) -> std::string {
            if (boolAt(result, {"isError"}, true)) return "the tool reported an error";
            const Json& content = memberAt(result, {"content"});
            if (!content.is_array() || content.empty()) return "no content";
            Json parsed = Json::parse(stringAt(content[0], {"text"}), nullptr, false);
            if (parsed.is_discarded()) return "the tool's text is not JSON";
            std::string wrong = check(parsed);
            if (wrong.empty()) text = std::move(parsed);
            return wrong;
        });
        return text;
    }

    // An answer must be right and, for the same request, the same every time: concurrent runs must
    // not leak into each other.
    static std::string same(std::string& first, const Json& text, bool right, const char* wrong) {
        if (!right) return wrong;
        std::string dumped = text.dump();
        if (first.empty()) first = dumped;
        return dumped == first ? "" : "a different answer to the same request";
    }

    bool initialize() {
        session_.clear();
        std::optional<Json> result =
            call("initialize", "initialize",
                 {{"protocolVersion", "2025-06-18"},
                  {"capabilities", Json::object()},
                  {"clientInfo", {{"name", "remit_bench_load"}, {"version", "1"}}}},
                 [](const Json& r) {
                     return stringAt(r, {"protocolVersion"}) == "2025-06-18" ? "" : "wrong protocol version";
                 });
        if (!result) return false;
        Json note{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}};
        HttpReply reply = connection_.post(head(), note.dump());
        OpStats& stats = result_.ops["initialize"];
        if (!reply.failure.empty()) {
            ++stats.errors["notifications/initialized: " + reply.failure];
            stats.lockouts += reply.lockout;
        } else if (reply.status != 202) {
            ++stats.errors[fmt::format("notifications/initialized: http {}", reply.status)];
        }
        return true;
    }

    // The bundled example an agent starts from: its program, host interface, policy, fixtures.
    std::optional<Json> examples() {
        return tool("remit_examples", {{"name", "hello"}}, [](const Json& files) -> std::string {
            for (const char* name : {"hello.rmt", "host.rmti", "policy.toml", "fixtures/run.json"})
                if (!memberAt(files, {name}).is_string()) return fmt::format("no {} in the example", name);
            return "";
        });
    }

    // A run that pauses at the mail for an approval, and the approval. The note differs per client
    // and cycle, so an answer meant for another client cannot pass for this one's.
    void forwardCycle(uint64_t cycle) {
        std::string note = fmt::format("note {} of client {}", cycle, index_);
        Json fixtures{{"capabilities",
                       {{"files.read", Json::array({{{"args", {{"path", "notes.txt"}}}, {"output", note}}})},
                        {"mail.send", Json::array({{{"output", nullptr}}})}}}};
        std::optional<Json> paused = tool(
            "remit_run (pauses)",
            {{"program", kForwardProgram},
             {"host", kForwardHost},
             {"fixtures", fixtures},
             {"inputs", Json{{"path", "notes.txt"}}}},
            [&](const Json& text) -> std::string {
                if (stringAt(text, {"status"}) != "approval_required") return "the run did not pause for the approval";
                if (stringAt(text, {"pending", "args", "body"}) != note) return "the pending call is not this client's";
                return stringAt(text, {"run_token"}).empty() ? "no run token" : "";
            },
            "remit_run");
        // A paused run is always finished, even when the time is up: a well-behaved agent does not
        // leave runs paused on the server.
        if (!paused) return;
        std::string expected = fmt::format("sent {} characters", note.size());
        tool("remit_resume", {{"run_token", memberAt(*paused, {"run_token"})}, {"approve", true}},
             [&](const Json& text) -> std::string {
                 if (stringAt(text, {"status"}) != "completed") return "the approved run did not complete";
                 return stringAt(text, {"result"}) == expected ? "" : "the approved run returned another result";
             });
    }
};

// ---------------------------------------------------------------- the attacker

// Holds `idle` connections that never send a byte and `slow` connections that send a request line
// and then one header byte a second (a head that never ends), each from the addresses given,
// reopening every connection the server closes as soon as it is closed.
class Attacker {
public:
    struct Stats {
        uint64_t opened = 0, closedByServer = 0, connectFailures = 0;
        std::map<int, uint64_t> answers;  // statuses the server answered them with (408, 503)
        double heldAverage = 0;           // connections open from the attacker's side, sampled
        size_t heldMax = 0;
    };

    Attacker(uint16_t port, std::vector<in_addr> idleFrom, size_t idle, std::vector<in_addr> slowFrom, size_t slow)
        : port_(port) {
        for (size_t i = 0; i < idle; ++i) sockets_.push_back({idleFrom[i % idleFrom.size()], false});
        for (size_t i = 0; i < slow; ++i) sockets_.push_back({slowFrom[i % slowFrom.size()], true});
    }
    ~Attacker() { stop(); }
    Attacker(const Attacker&) = delete;
    Attacker& operator=(const Attacker&) = delete;

    void start() {
        if (sockets_.empty()) return;
        thread_ = std::thread([this] { loop(); });
    }
    Stats stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        for (Socket& s : sockets_)
            if (s.fd >= 0) ::close(s.fd);
        for (Socket& s : sockets_) s.fd = -1;
        if (samples_) stats_.heldAverage = double(heldSum_) / double(samples_);
        return stats_;
    }

private:
    struct Socket {
        in_addr from;
        bool slow;
        int fd = -1;
        bool connecting = false;
        size_t sent = 0;
        Clock::time_point nextByte{};
        Clock::time_point retryAt{};
    };

    uint16_t port_;
    std::vector<Socket> sockets_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    Stats stats_;
    uint64_t heldSum_ = 0, samples_ = 0;

    static constexpr std::string_view kSlowHead = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

    void closeSocket(Socket& s, bool byServer) {
        ::close(s.fd);
        s.fd = -1;
        s.connecting = false;
        if (byServer) ++stats_.closedByServer;
    }

    void loop() {
        std::vector<pollfd> fds;
        std::vector<size_t> which;
        while (!stop_) {
            auto now = Clock::now();
            size_t held = 0;
            for (Socket& s : sockets_) {
                if (s.fd < 0 && now >= s.retryAt) {
                    s.fd = startConnect(s.from, port_);
                    s.connecting = s.fd >= 0;
                    s.sent = 0;
                    if (s.fd < 0) {
                        ++stats_.connectFailures;
                        s.retryAt = now + milliseconds(100);
                    }
                }
                if (s.fd >= 0 && !s.connecting) ++held;
                // The slowloris: its request line at once, then a byte a second of a header that
                // never ends.
                if (s.fd >= 0 && !s.connecting && s.slow && now >= s.nextByte) {
                    size_t requestLine = kSlowHead.find("X-Slow");
                    std::string_view bytes = s.sent == 0                 ? kSlowHead.substr(0, requestLine)
                                             : s.sent < kSlowHead.size() ? kSlowHead.substr(s.sent, 1)
                                                                         : std::string_view("a");
                    if (::send(s.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
                        s.sent += bytes.size();
                    s.nextByte = now + std::chrono::seconds(1);
                }
            }
            heldSum_ += held;
            ++samples_;
            stats_.heldMax = std::max(stats_.heldMax, held);
            fds.clear();
            which.clear();
            for (size_t i = 0; i < sockets_.size(); ++i)
                if (sockets_[i].fd >= 0) {
                    fds.push_back({sockets_[i].fd, short(sockets_[i].connecting ? POLLOUT : POLLIN), 0});
                    which.push_back(i);
                }
            ::poll(fds.data(), fds.size(), 50);
            for (size_t k = 0; k < fds.size(); ++k) {
                Socket& s = sockets_[which[k]];
                if (!fds[k].revents) continue;
                if (s.connecting) {
                    int error = 0;
                    socklen_t length = sizeof error;
                    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &length);
                    if (error != 0) {
                        ++stats_.connectFailures;
                        closeSocket(s, false);
                        s.retryAt = Clock::now() + milliseconds(100);
                        continue;
                    }
                    s.connecting = false;
                    ++stats_.opened;
                    s.nextByte = Clock::now();
                    continue;
                }
                char chunk[4096];
                ssize_t n = ::recv(s.fd, chunk, sizeof chunk, MSG_DONTWAIT);
                if (n > 0) {
                    std::string_view text(chunk, size_t(n));
                    if (text.starts_with("HTTP/1.1 ") && text.size() >= 12)
                        ++stats_.answers[std::atoi(std::string(text.substr(9, 3)).c_str())];
                    continue;  // the close follows
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                closeSocket(s, true);
            }
        }
    }
};

Json attackerJson(const Attacker::Stats& s) {
    Json answers = Json::object();
    for (const auto& [status, n] : s.answers) answers[std::to_string(status)] = n;
    return Json{{"opened", s.opened}, {"closed_by_server", s.closedByServer}, {"connect_failures", s.connectFailures},
                {"answers", answers}, {"held_average", s.heldAverage},        {"held_max", s.heldMax}};
}

// ---------------------------------------------------------------- scenario results

struct ScenarioResult {
    std::string name;
    std::string setup;  // one line: who was involved
    size_t clients = 0;
    double seconds = 0;
    OpTable ops;
    uint64_t reconnects = 0;
    Percentiles connect;
    std::optional<Attacker::Stats> attacker;
    Json misbehaver;  // serve: what the misbehaving session did and got
    ProcSample before, during, after;
    std::string exit;
    CpuShare cpu;                       // of the machine, during the scenario
    std::vector<std::string> problems;  // the verdict: empty is a pass

    uint64_t answered() const {
        uint64_t n = 0;
        for (const auto& [op, s] : ops) n += s.latencies.size();
        return n;
    }
    uint64_t errors() const {
        uint64_t n = 0;
        for (const auto& [op, s] : ops) n += s.errorCount();
        return n;
    }
    uint64_t lockouts() const {
        uint64_t n = 0;
        for (const auto& [op, s] : ops) n += s.lockouts;
        return n;
    }
    std::vector<float> allLatencies() const {
        std::vector<float> all;
        for (const auto& [op, s] : ops) all.insert(all.end(), s.latencies.begin(), s.latencies.end());
        return all;
    }
};

// `stoppedByUs`: the server was still running when the driver stopped it; one that ended on its
// own, even with exit 0, has failed its clients.
void judge(ScenarioResult& r, ServerProcess& server, long baselineFds, bool stoppedByUs) {
    if (r.lockouts() > 0) r.problems.push_back(fmt::format("{} lock-out(s) of well-behaved clients", r.lockouts()));
    if (uint64_t other = r.errors() - r.lockouts(); other > 0)
        r.problems.push_back(fmt::format("{} other error(s) of well-behaved clients", other));
    if (r.answered() == 0) r.problems.push_back("no request was answered");
    if (!stoppedByUs)
        r.problems.push_back(fmt::format("the server ended before it was stopped: {}", server.exitText()));
    else if (!server.cleanExit())
        r.problems.push_back(fmt::format("the server did not exit cleanly when stopped: {}", server.exitText()));
    if (r.after.fds > baselineFds)
        r.problems.push_back(fmt::format("the server kept {} descriptor(s) open after every client had gone",
                                         r.after.fds - baselineFds));
}

// ---------------------------------------------------------------- mcp scenarios

std::string randomToken(std::mt19937_64& random) { return fmt::format("{:016x}{:016x}", random(), random()); }

ScenarioResult runMcp(const Options& options, const std::string& variant) {
    ScenarioResult r;
    r.name = variant;
    r.clients = options.clients;
    TempDir dir;
    // One key per client, as a hosted server gives each agent its own: per-key quotas (such as the
    // 8 paused runs of docs/mcp.md) then never couple the clients.
    std::mt19937_64 random(std::random_device{}());
    std::vector<std::string> tokens;
    Json keys = Json::array();
    for (size_t i = 0; i < options.clients; ++i) {
        tokens.push_back(randomToken(random));
        keys.push_back({{"id", fmt::format("agent-{}", i)}, {"sha256", remit::sha256Hex(tokens.back())}});
    }
    std::ofstream(dir.path() / "keys.json") << Json{{"keys", keys}}.dump();
    std::vector<std::string> argv{options.remitvm,
                                  "mcp",
                                  "--http",
                                  "--host",
                                  "127.0.0.1",
                                  "--port",
                                  "0",
                                  "--keys",
                                  (dir.path() / "keys.json").string()};
    if (options.usage) {
        argv.push_back("--usage");
        argv.push_back((dir.path() / "usage.sqlite").string());
    }
    ServerProcess server(argv, false);
    std::optional<uint16_t> port = server.waitForPort(std::chrono::seconds(30));
    if (!port) throw std::runtime_error("the server did not start listening:\n" + server.stderrTail());
    r.before = sampleProcess(server.pid());
    CpuTicks cpuBefore = cpuTicks(server.pid());

    std::optional<Attacker> attacker;
    if (variant != "mcp") {
        std::vector<in_addr> idleFrom, slowFrom;
        if (variant == "mcp+idle") {
            for (size_t i = 0; i < options.attackerAddresses; ++i) {
                idleFrom.push_back(idleAddress(i));
                slowFrom.push_back(slowAddress(i));
            }
        } else {
            for (size_t i = 0; i < options.clients; ++i) {
                idleFrom.push_back(clientAddress(i));
                slowFrom.push_back(clientAddress(options.clients - 1 - i));
            }
        }
        attacker.emplace(*port, idleFrom, options.idle, slowFrom, options.slowloris);
        attacker->start();
        // The attacker arrives first and holds what it can before the clients come.
        std::this_thread::sleep_for(milliseconds(1500));
    }
    r.setup = variant == "mcp" ? fmt::format("{} keyed clients, each from its own address", options.clients)
                               : fmt::format("{} keyed clients; attacker: {} idle + {} slowloris connections from {}",
                                             options.clients, options.idle, options.slowloris,
                                             variant == "mcp+idle"
                                                 ? fmt::format("{} + {} addresses of its own",
                                                               options.attackerAddresses, options.attackerAddresses)
                                                 : std::string("the clients' addresses"));

    std::atomic<bool> stop{false};
    std::vector<ClientResult> results(options.clients);
    std::vector<std::thread> threads;
    auto started = Clock::now();
    for (size_t i = 0; i < options.clients; ++i)
        threads.emplace_back([&, i] {
            McpClient client(i, tokens[i], clientAddress(i), *port, stop);
            results[i] = client.run();
        });
    std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
    r.during = sampleProcess(server.pid());
    stop = true;
    for (std::thread& t : threads) t.join();
    r.seconds = msSince(started) / 1000;
    r.cpu = cpuShare(cpuBefore, cpuTicks(server.pid()));
    if (attacker) r.attacker = attacker->stop();

    std::vector<float> connectMs;
    for (const ClientResult& c : results) {
        mergeOps(r.ops, c.ops);
        r.reconnects += c.connects > 0 ? c.connects - 1 : 0;
        connectMs.insert(connectMs.end(), c.connectMs.begin(), c.connectMs.end());
    }
    r.connect = percentiles(connectMs);
    // Every client asked the same check and the same run of hello: one answer each.
    for (size_t k = 0; k < 2; ++k) {
        std::set<std::string> answers;
        for (const ClientResult& c : results)
            if (!c.firstAnswers[k].empty()) answers.insert(c.firstAnswers[k]);
        if (answers.size() > 1)
            ++r.ops[k == 0 ? "remit_check" : "remit_run (completes)"].errors["clients got different answers"];
    }

    // Every client has closed its connection: the server must be back to where it started.
    r.after = settle(server.pid(), r.before.fds, std::chrono::seconds(5));
    bool alive = !server.exited();
    if (alive) ::kill(server.pid(), SIGTERM);
    server.waitExit(std::chrono::seconds(30));
    r.exit = alive ? server.exitText() : "ended before it was stopped: " + server.exitText();
    judge(r, server, r.before.fds, alive);
    if (!server.cleanExit()) fmt::print(stderr, "server stderr:\n{}\n", server.stderrTail());
    return r;
}

// ---------------------------------------------------------------- serve

// The serve transcript's program (docs/serve.md): it fetches a page, so every run pauses once.
constexpr const char* kFetchProgram =
    "program fetch\nuses web.fetch\n\nfn main(topic: Str) -> Str {\n"
    "  let page = web.fetch(\"https://example.org/{topic}\")\n  return \"got {page}\"\n}\n";
constexpr const char* kFetchHost =
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  idempotent\n\n"
    "capability mail.send(to: Str, body: Str approve untrusted)\n\ninput topic tags untrusted\n";
// A loop the checker accepts (it is bounded) that would run far longer than the default 10 M steps.
constexpr const char* kSpinProgram =
    "program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000000) {\n    n = n + i\n  }\n"
    "  return n\n}\n";

// The server's stdout, split into replies and handed to the session that waits for each.
class ServeLink {
public:
    explicit ServeLink(ServerProcess& server) : server_(server) {}

    // Writes one request line; lines of different threads never interleave.
    bool send(std::string_view line) {
        std::lock_guard<std::mutex> lock(writeMutex_);
        std::string bytes(line);
        bytes += '\n';
        std::string_view rest = bytes;
        while (!rest.empty()) {
            ssize_t n = ::write(server_.stdinFd(), rest.data(), rest.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            rest.remove_prefix(size_t(n));
        }
        return true;
    }

    // Replies for `session`, in order; the misbehaver's inbox also gets every reply that names no
    // session or one no well-behaved client uses.
    struct Inbox {
        std::mutex mutex;
        std::condition_variable arrived;
        std::deque<Json> replies;
        uint64_t total = 0;
    };
    void addInbox(const std::string& session, Inbox& inbox) { inboxes_[session] = &inbox; }
    void setDefaultInbox(Inbox& inbox) { fallback_ = &inbox; }

    static std::optional<Json> next(Inbox& inbox, Clock::time_point deadline) {
        std::unique_lock<std::mutex> lock(inbox.mutex);
        if (!inbox.arrived.wait_until(lock, deadline, [&] { return !inbox.replies.empty(); })) return std::nullopt;
        Json reply = std::move(inbox.replies.front());
        inbox.replies.pop_front();
        return reply;
    }

    void startReading() {
        reader_ = std::thread([this] { read(); });
    }
    void join() {
        if (reader_.joinable()) reader_.join();
    }
    uint64_t unparsable() const { return unparsable_; }

private:
    ServerProcess& server_;
    std::mutex writeMutex_;
    std::map<std::string, Inbox*> inboxes_;  // fixed before reading starts
    Inbox* fallback_ = nullptr;
    std::thread reader_;
    std::atomic<uint64_t> unparsable_{0};

    void deliver(std::string_view line) {
        Json reply = Json::parse(line, nullptr, false);
        if (reply.is_discarded()) {
            ++unparsable_;
            return;
        }
        Inbox* inbox = fallback_;
        if (reply.is_object() && reply.contains("session") && reply["session"].is_string())
            if (auto it = inboxes_.find(reply["session"].get<std::string>()); it != inboxes_.end()) inbox = it->second;
        std::lock_guard<std::mutex> lock(inbox->mutex);
        inbox->replies.push_back(std::move(reply));
        ++inbox->total;
        inbox->arrived.notify_one();
    }

    void read() {
        std::string buffer;
        char chunk[65536];
        for (;;) {
            ssize_t n = ::read(server_.stdoutFd(), chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            buffer.append(chunk, size_t(n));
            size_t start = 0, newline;
            while ((newline = buffer.find('\n', start)) != std::string::npos) {
                deliver(std::string_view(buffer).substr(start, newline - start));
                start = newline + 1;
            }
            buffer.erase(0, start);
        }
    }
};

// A well-behaved host's session: run the fetch program, perform the call it pauses at with a page
// of its own, check the result, again. The page names the session and cycle, so a reply meant for
// another session cannot pass for this one's.
OpTable wellBehavedSession(ServeLink& link, ServeLink::Inbox& inbox, const std::string& session,
                           const std::atomic<bool>& stop) {
    OpTable ops;
    int64_t id = 1;
    auto exchange = [&](const std::string& op, const Json& request, const std::string& expectStatus,
                        const std::function<std::string(const Json&)>& check) -> std::optional<Json> {
        OpStats& stats = ops[op];
        auto started = Clock::now();
        if (!link.send(request.dump())) {
            ++stats.errors["the server's input is closed"];
            ++stats.lockouts;
            return std::nullopt;
        }
        std::optional<Json> reply = ServeLink::next(inbox, started + kAnswerTimeout);
        double elapsed = msSince(started);
        if (!reply) {
            ++stats.errors["response timeout"];
            ++stats.lockouts;
            return std::nullopt;
        }
        std::string status = stringAt(*reply, {"status"});
        if (status == "error") {
            std::string code = stringAt(*reply, {"error", "code"});
            ++stats.errors["error " + code];
            // Refused for want of room or because its own finished session still counted: locked out.
            if (code == "too_many_sessions" || code == "session_busy") ++stats.lockouts;
            return std::nullopt;
        }
        if (memberAt(*reply, {"id"}) != request["id"]) {
            ++stats.errors["reply to another request"];
            return std::nullopt;
        }
        if (status != expectStatus) {
            ++stats.errors["status " + status];
            return std::nullopt;
        }
        if (std::string wrong = check(*reply); !wrong.empty()) {
            ++stats.errors["wrong answer: " + wrong];
            return std::nullopt;
        }
        stats.latencies.push_back(float(elapsed));
        return reply;
    };
    for (uint64_t cycle = 0; !stop; ++cycle) {
        std::string topic = fmt::format("{}-{}", session, cycle);
        Json run{{"type", "run"},
                 {"id", id++},
                 {"session", session},
                 {"program", kFetchProgram},
                 {"host", kFetchHost},
                 {"grants", Json::array({{{"name", "web.fetch"}, {"mode", "ask"}}})},
                 {"inputs", {{"topic", topic}}}};
        std::optional<Json> paused = exchange("run", run, "host-call", [&](const Json& reply) -> std::string {
            return stringAt(reply, {"call", "args", "url"}) == "https://example.org/" + topic
                       ? ""
                       : "the call is not this run's";
        });
        if (!paused) {
            // Whatever state the session is in, it is ended before the next cycle.
            link.send(Json{{"type", "abort"}, {"session", session}}.dump());
            std::this_thread::sleep_for(milliseconds(100));
            std::lock_guard<std::mutex> lock(inbox.mutex);
            inbox.replies.clear();
            continue;
        }
        std::string page = "page about " + topic;
        Json resume{{"type", "resume"},
                    {"id", id++},
                    {"session", session},
                    {"call", memberAt(*paused, {"call", "id"})},
                    {"perform", {{"result", page}}}};
        exchange("resume", resume, "completed", [&](const Json& reply) -> std::string {
            return stringAt(reply, {"result"}) == "got " + page ? "" : "the result is not this run's";
        });
    }
    return ops;
}

// The misbehaving session (and the garbage that belongs to no session): everything a confused or
// hostile host process might write, in a loop. It holds at most one session at a time, so with
// the 63 others the server runs exactly its 64.
Json misbehave(ServeLink& link, ServeLink::Inbox& inbox, const std::atomic<bool>& stop) {
    std::map<std::string, uint64_t> sent;
    std::map<std::string, uint64_t> got;
    const std::string session = "intruder";
    std::mt19937 random(7);
    int64_t id = 1;
    auto settleReplies = [&](Clock::time_point until) {
        while (Clock::now() < until) {
            std::optional<Json> reply = ServeLink::next(inbox, until);
            if (!reply) break;
            std::string status = stringAt(*reply, {"status"});
            if (status == "error") status += " " + stringAt(*reply, {"error", "code"});
            if (status == "failed") status += " " + stringAt(*reply, {"stage"});
            ++got[status];
        }
    };
    // Waits for a reply of `status` (others are counted on the way); false after `timeout`.
    auto awaitStatus = [&](const std::string& status, milliseconds timeout) -> std::optional<Json> {
        auto deadline = Clock::now() + timeout;
        while (true) {
            std::optional<Json> reply = ServeLink::next(inbox, deadline);
            if (!reply) return std::nullopt;
            std::string s = stringAt(*reply, {"status"});
            std::string key = s == "error"    ? s + " " + stringAt(*reply, {"error", "code"})
                              : s == "failed" ? s + " " + stringAt(*reply, {"stage"})
                                              : s;
            ++got[key];
            if (s == status && stringAt(*reply, {"session"}) == session) return reply;
        }
    };
    auto say = [&](const std::string& what, std::string_view line) {
        ++sent[what];
        link.send(line);
    };
    while (!stop) {
        say("garbage line", "this is not json");
        std::string binary(200, '\0');
        for (char& c : binary) c = char(random() % 255 + 1);
        std::replace(binary.begin(), binary.end(), '\n', ' ');
        say("random bytes", binary);
        say("oversized line (9 MiB)", std::string(9 << 20, 'x'));
        say("unknown field",
            Json{{"type", "run"}, {"session", session}, {"program", ""}, {"host", ""}, {"limit", 1}}.dump());
        say("resume of a session that does not exist",
            Json{{"type", "resume"}, {"session", "ghost"}, {"call", 1}, {"perform", {{"result", 1}}}}.dump());
        if (stop) break;
        // A runaway program: the default step limit stops it (about a second of one core).
        say("runaway program",
            Json{{"type", "run"}, {"id", id++}, {"session", session}, {"program", kSpinProgram}, {"host", ""}}.dump());
        awaitStatus("failed", std::chrono::seconds(30));
        if (stop) break;
        // A call it never resumes, pestered with wrong resumes and a second run, then an abort storm.
        say("run it never resumes", Json{{"type", "run"},
                                         {"id", id++},
                                         {"session", session},
                                         {"program", kFetchProgram},
                                         {"host", kFetchHost},
                                         {"grants", Json::array({{{"name", "web.fetch"}}})},
                                         {"inputs", {{"topic", "nothing"}}}}
                                        .dump());
        if (awaitStatus("host-call", std::chrono::seconds(30))) {
            say("resume of the wrong call",
                Json{{"type", "resume"}, {"session", session}, {"call", 99}, {"perform", {{"result", "x"}}}}.dump());
            say("run of a busy session",
                Json{{"type", "run"}, {"session", session}, {"program", kSpinProgram}, {"host", ""}}.dump());
            settleReplies(Clock::now() + milliseconds(1000));  // paused meanwhile, holding its slot
            for (int i = 0; i < 200; ++i)
                say("abort storm (sessions that do not exist)",
                    Json{{"type", "abort"}, {"session", fmt::format("ghost-{}", i)}}.dump());
            for (int i = 0; i < 50; ++i)
                say("abort storm (its own session)", Json{{"type", "abort"}, {"session", session}}.dump());
        }
        settleReplies(Clock::now() + milliseconds(200));
    }
    settleReplies(Clock::now() + milliseconds(500));
    Json out{{"sent", sent}, {"replies", got}};
    return out;
}

ScenarioResult runServe(const Options& options) {
    ScenarioResult r;
    r.name = "serve";
    size_t sessions = std::min(options.clients, kServeMaxSessions) - 1;
    r.clients = sessions;
    r.setup =
        fmt::format("{} well-behaved sessions + 1 misbehaving (the server's limit is {})", sessions, kServeMaxSessions);
    ServerProcess server({options.remitvm, "serve"}, true);
    ServeLink link(server);
    std::vector<std::unique_ptr<ServeLink::Inbox>> inboxes;
    for (size_t i = 0; i < sessions; ++i) {
        inboxes.push_back(std::make_unique<ServeLink::Inbox>());
        link.addInbox(fmt::format("host-{}", i), *inboxes.back());
    }
    ServeLink::Inbox intruderInbox;
    link.setDefaultInbox(intruderInbox);
    link.startReading();
    std::this_thread::sleep_for(milliseconds(100));
    r.before = sampleProcess(server.pid());
    CpuTicks cpuBefore = cpuTicks(server.pid());

    std::atomic<bool> stop{false};
    std::vector<OpTable> results(sessions);
    std::vector<std::thread> threads;
    auto started = Clock::now();
    Json misbehaver;
    std::thread intruder([&] { misbehaver = misbehave(link, intruderInbox, stop); });
    for (size_t i = 0; i < sessions; ++i)
        threads.emplace_back(
            [&, i] { results[i] = wellBehavedSession(link, *inboxes[i], fmt::format("host-{}", i), stop); });
    std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
    r.during = sampleProcess(server.pid());
    stop = true;
    for (std::thread& t : threads) t.join();
    intruder.join();
    r.seconds = msSince(started) / 1000;
    r.cpu = cpuShare(cpuBefore, cpuTicks(server.pid()));
    for (const OpTable& ops : results) mergeOps(r.ops, ops);
    misbehaver["unparsable_reply_lines"] = link.unparsable();
    r.misbehaver = misbehaver;
    r.after = settle(server.pid(), r.before.fds, std::chrono::seconds(5));
    // End of input: the server refuses what is still paused and exits 0.
    bool alive = !server.exited();
    server.closeStdin();
    server.waitExit(std::chrono::seconds(30));
    link.join();
    r.exit = alive ? server.exitText() : "ended before it was stopped: " + server.exitText();
    judge(r, server, r.before.fds, alive);
    if (!server.cleanExit()) fmt::print(stderr, "server stderr:\n{}\n", server.stderrTail());
    return r;
}

// ---------------------------------------------------------------- report

Json percentilesJson(const Percentiles& p) {
    return Json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

Json resultJson(const ScenarioResult& r) {
    Json ops = Json::object();
    for (const auto& [name, s] : r.ops)
        ops[name] = {{"answered", s.latencies.size()},
                     {"latency_ms", percentilesJson(percentiles(s.latencies))},
                     {"errors", s.errors},
                     {"lockouts", s.lockouts}};
    Json errors = Json::object();
    for (const auto& [name, s] : r.ops)
        for (const auto& [kind, n] : s.errors) errors[kind] = errors.value(kind, uint64_t(0)) + n;
    Json out{{"scenario", r.name},
             {"setup", r.setup},
             {"clients", r.clients},
             {"misbehaving_clients", r.name == "serve" ? 1 : 0},
             {"seconds", r.seconds},
             {"requests", r.answered() + r.errors()},
             {"answered", r.answered()},
             {"requests_per_second", double(r.answered()) / r.seconds},
             {"latency_ms", percentilesJson(percentiles(r.allLatencies()))},
             {"errors", r.errors()},
             {"errors_by_kind", errors},
             {"lockouts", r.lockouts()},
             {"operations", ops},
             {"server",
              {{"before", sampleJson(r.before)},
               {"during", sampleJson(r.during)},
               {"after", sampleJson(r.after)},
               {"exit", r.exit}}},
             {"cpu_share", {{"server", r.cpu.server}, {"driver", r.cpu.driver}, {"others", r.cpu.others}}},
             {"verdict", r.problems.empty() ? "pass" : "fail"},
             {"problems", r.problems}};
    if (r.name != "serve") {
        out["reconnects"] = r.reconnects;
        out["connect_ms"] = percentilesJson(r.connect);
    }
    if (r.attacker) out["attacker"] = attackerJson(*r.attacker);
    if (!r.misbehaver.is_null()) out["misbehaver"] = r.misbehaver;
    return out;
}

// The table and the details; on stderr when stdout carries the JSON.
void printReport(std::FILE* out, const std::vector<ScenarioResult>& results) {
    fmt::print(out, "\n{:<11} {:>7} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>7}\n", "scenario", "clients",
               "seconds", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "lock-outs", "verdict");
    for (const ScenarioResult& r : results) {
        Percentiles p = percentiles(r.allLatencies());
        std::string clients = r.name == "serve" ? fmt::format("{}+1", r.clients) : std::to_string(r.clients);
        fmt::print(out, "{:<11} {:>7} {:>7.1f} {:>9} {:>8.1f} {:>8.2f} {:>8.2f} {:>8.1f} {:>7} {:>9} {:>7}\n", r.name,
                   clients, r.seconds, r.answered() + r.errors(), double(r.answered()) / r.seconds, p.p50, p.p99, p.max,
                   r.errors(), r.lockouts(), r.problems.empty() ? "pass" : "FAIL");
    }
    for (const ScenarioResult& r : results) {
        fmt::print(out, "\n== {}: {}\n", r.name, r.setup);
        fmt::print(out, "  {:<24} {:>9} {:>8} {:>8} {:>8} {:>8} {:>7}\n", "operation", "answered", "p50 ms", "p90 ms",
                   "p99 ms", "max ms", "errors");
        for (const auto& [name, s] : r.ops) {
            Percentiles p = percentiles(s.latencies);
            fmt::print(out, "  {:<24} {:>9} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.1f} {:>7}\n", name, s.latencies.size(),
                       p.p50, p.p90, p.p99, p.max, s.errorCount());
            for (const auto& [kind, n] : s.errors) fmt::print(out, "      {} × {}\n", n, kind);
        }
        if (r.name != "serve")
            fmt::print(out, "  reconnections {}; opening a connection: p50 {:.2f} ms, p99 {:.2f} ms, max {:.1f} ms\n",
                       r.reconnects, r.connect.p50, r.connect.p99, r.connect.max);
        if (r.attacker) {
            const Attacker::Stats& a = *r.attacker;
            std::string answers;
            for (const auto& [status, n] : a.answers) answers += fmt::format(" {}×{}", n, status);
            fmt::print(out,
                       "  attacker: opened {}, closed by the server {}, answered{}, connect failures {}, "
                       "held {:.0f} on average (max {})\n",
                       a.opened, a.closedByServer, answers.empty() ? " none" : answers, a.connectFailures,
                       a.heldAverage, a.heldMax);
        }
        if (!r.misbehaver.is_null()) fmt::print(out, "  misbehaver: {}\n", r.misbehaver.dump());
        fmt::print(out,
                   "  server: before {} fds, {} threads, {} MiB; during {} fds, {} threads, {} MiB; after {} fds, "
                   "{} threads; peak {} MiB; {}\n",
                   r.before.fds, r.before.threads, r.before.rssKb / 1024, r.during.fds, r.during.threads,
                   r.during.rssKb / 1024, r.after.fds, r.after.threads, r.after.peakKb / 1024, r.exit);
        fmt::print(out, "  the machine's CPU: server {:.0f} %, this driver {:.0f} %, other processes {:.0f} %\n",
                   100 * r.cpu.server, 100 * r.cpu.driver, 100 * r.cpu.others);
        for (const std::string& p : r.problems) fmt::print(out, "  FAIL: {}\n", p);
    }
}

Json machineJson() {
    utsname u{};
    ::uname(&u);
    return Json{{"cores", std::thread::hardware_concurrency()},
                {"kernel", fmt::format("{} {}", u.sysname, u.release)},
                {"date_utc", [] {
                     std::time_t now = std::time(nullptr);
                     std::tm tm{};
                     ::gmtime_r(&now, &tm);
                     return fmt::format("{:04}-{:02}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
                 }()}};
}

bool parseOptions(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::optional<std::string> {
            if (i + 1 >= argc) return std::nullopt;
            return std::string(argv[++i]);
        };
        auto count = [&](size_t& out, size_t min) {
            std::optional<std::string> v = value();
            if (!v || v->empty() || v->find_first_not_of("0123456789") != std::string::npos) return false;
            out = std::stoul(*v);
            return out >= min;
        };
        if (a == "--remitvm") {
            std::optional<std::string> v = value();
            if (!v) return false;
            o.remitvm = *v;
        } else if (a == "--seconds") {
            std::optional<std::string> v = value();
            char* end = nullptr;
            if (!v) return false;
            o.seconds = std::strtod(v->c_str(), &end);
            if (*end != '\0' || !(o.seconds > 0) || o.seconds > 3600) return false;
        } else if (a == "--scenarios") {
            std::optional<std::string> v = value();
            if (!v) return false;
            o.scenarios.clear();
            std::istringstream in(*v);
            for (std::string name; std::getline(in, name, ',');) {
                if (std::find(std::begin(kScenarioNames), std::end(kScenarioNames), name) == std::end(kScenarioNames)) {
                    fmt::print(stderr, "remit_bench_load: unknown scenario '{}'\n", name);
                    return false;
                }
                o.scenarios.push_back(name);
            }
            if (o.scenarios.empty()) return false;
        } else if (a == "--clients") {
            // Loopback addresses 127.0.0.2 to 127.0.0.255 are the clients'.
            if (!count(o.clients, 2) || o.clients > 254) return false;
        } else if (a == "--idle") {
            if (!count(o.idle, 0)) return false;
        } else if (a == "--slowloris") {
            if (!count(o.slowloris, 0)) return false;
        } else if (a == "--attacker-addresses") {
            if (!count(o.attackerAddresses, 1) || o.attackerAddresses > 254) return false;
        } else if (a == "--no-usage") {
            o.usage = false;
        } else if (a == "--json") {
            std::optional<std::string> v = value();
            if (!v) return false;
            o.jsonPath = *v;
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
        usage(stdout);
        return 0;
    }
    if (!parseOptions(argc, argv, options)) {
        usage(stderr);
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);  // a server that dies mid-write is reported, not fatal
    // The attacker's connections and the clients' need descriptors, and so does the server, which
    // inherits the limit: without enough, the driver would measure its own shortage.
    rlim_t needed = options.clients + options.idle + options.slowloris + 256;
    if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < needed) {
        if (files.rlim_max != RLIM_INFINITY && files.rlim_max < needed) {
            fmt::print(stderr,
                       "remit_bench_load: error: {} descriptors are needed and the hard limit is {}; "
                       "pass smaller --idle and --slowloris\n",
                       needed, files.rlim_max);
            return 2;
        }
        files.rlim_cur = needed;
        ::setrlimit(RLIMIT_NOFILE, &files);
    }
    std::vector<ScenarioResult> results;
    try {
        for (const std::string& name : options.scenarios) {
            fmt::print(stderr, "remit_bench_load: {} for {} s ...\n", name, options.seconds);
            results.push_back(name == "serve" ? runServe(options) : runMcp(options, name));
        }
    } catch (const std::exception& e) {
        fmt::print(stderr, "remit_bench_load: error: {}\n", e.what());
        return 2;
    }
    std::FILE* out = options.jsonPath == "-" ? stderr : stdout;
    printReport(out, results);
    if (!options.jsonPath.empty()) {
        Json doc{{"machine", machineJson()},
                 {"remitvm", options.remitvm},
                 {"usage_metering", options.usage},
                 {"scenarios", Json::array()}};
        for (const ScenarioResult& r : results) doc["scenarios"].push_back(resultJson(r));
        if (options.jsonPath == "-") {
            fmt::print("{}\n", doc.dump(2));
        } else {
            std::ofstream(options.jsonPath) << doc.dump(2) << '\n';
        }
    }
    bool pass = std::all_of(results.begin(), results.end(), [](const ScenarioResult& r) { return r.problems.empty(); });
    fmt::print(out, "\nremit_bench_load: {}\n",
               pass ? "pass: no well-behaved client was locked out or failed, no crash" : "FAIL (see above)");
    return pass ? 0 : 1;
}
