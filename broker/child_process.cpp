// A child process spoken to one line at a time: see child_process.h.
#include "broker/child_process.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/files.h"

extern char** environ;

namespace remit {

namespace {

constexpr std::size_t kReadChunk = 64 * 1024;

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

}  // namespace

std::string describeExitStatus(int status) {
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        const char* name = sigabbrev_np(WTERMSIG(status));
        return std::string("killed by signal ") + (name ? std::string("SIG") + name : std::to_string(WTERMSIG(status)));
    }
    return "status " + std::to_string(status);
}

std::string printableExcerpt(std::string_view s, std::size_t max) {
    std::string out;
    for (std::size_t i = 0; i < s.size() && i < max; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    }
    if (s.size() > max) out += "...";
    return out;
}

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

bool checkProgram(const std::vector<std::string>& argv, const std::string& workingDir, const char* what,
                  std::string& error) {
    if (argv.empty() || argv[0].empty()) {
        error = std::string("the ") + what + " command is empty";
        return false;
    }
    // A relative path with a slash names a file in the directory the process will start in.
    std::string program = argv[0];
    if (!workingDir.empty() && program.find('/') != std::string::npos && program[0] != '/')
        program = workingDir + "/" + program;
    if (findOnPath(program)) return true;
    std::string fileKind = argv[0].find('/') == std::string::npos ? "" : nonRegularKind(argv[0]);
    if (!fileKind.empty())
        error = std::string(what) + " program '" + argv[0] + "' is " + fileKind + ", not a program";
    else
        error = std::string(what) + " program '" + argv[0] + "' not found" +
                (argv[0].find('/') == std::string::npos ? " on PATH" : " or not executable");
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

int spawnProcess(const std::vector<std::string>& argv, const ChildFds& fds, const std::string& workingDir,
                 pid_t& pid) {
    if (argv.empty()) return EINVAL;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (fds.in >= 0) posix_spawn_file_actions_adddup2(&actions, fds.in, STDIN_FILENO);
    if (fds.out >= 0) posix_spawn_file_actions_adddup2(&actions, fds.out, STDOUT_FILENO);
    if (!fds.errPath.empty())
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, fds.errPath.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                         0600);
    else if (fds.err >= 0)
        posix_spawn_file_actions_adddup2(&actions, fds.err, STDERR_FILENO);
    // Every other descriptor is closed in the child.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // Before the exec, so a relative program or argument resolves where the caller means.
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

ChildProcess::ChildProcess(std::vector<std::string> argv, ChildProcessOptions options)
    : argv_(std::move(argv)), display_(quoteForDisplay(argv_)), options_(std::move(options)) {}

ChildProcess::~ChildProcess() { stop(true); }

bool ChildProcess::start(std::string& error) {
    int toChild[2] = {-1, -1}, fromChild[2] = {-1, -1};
    if (::pipe2(toChild, O_CLOEXEC) != 0 || ::pipe2(fromChild, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1]})
            if (fd >= 0) ::close(fd);
        return false;
    }
    // stderr is inherited as is, or appended to the log file.
    ChildFds fds{toChild[0], fromChild[1], -1, options_.stderrPath};
    pid_t pid = -1;
    int rc = spawnProcess(argv_, fds, options_.workingDir, pid);
    ::close(toChild[0]);
    ::close(fromChild[1]);
    if (rc != 0) {
        ::close(toChild[1]);
        ::close(fromChild[0]);
        error = std::strerror(rc);
        return false;
    }
    ::fcntl(toChild[1], F_SETFL, ::fcntl(toChild[1], F_GETFL) | O_NONBLOCK);
    ::fcntl(fromChild[0], F_SETFL, ::fcntl(fromChild[0], F_GETFL) | O_NONBLOCK);
    pid_ = pid;
    toChild_ = toChild[1];
    fromChild_ = fromChild[0];
    inbuf_.clear();
    scanned_ = 0;
    outbox_.clear();
    return true;
}

bool ChildProcess::hasExited() const {
    if (pid_ <= 0) return true;
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
    return info.si_pid == pid_;
}

bool ChildProcess::waitExited(uint64_t ms) const {
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
        if (hasExited()) return true;
        if (Clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

std::size_t ChildProcess::pipeBacklog() const {
    int n = 0;
    if (toChild_ < 0 || ::ioctl(toChild_, FIONREAD, &n) != 0 || n < 0) return SIZE_MAX;
    return static_cast<std::size_t>(n);
}

bool ChildProcess::stdinUnread(std::size_t written) {
    if (written == 0) return true;
    if (pid_ <= 0 || pipeBacklog() != written) return false;
    ::kill(-pid_, SIGKILL);
    waitExited(options_.termGraceMs);
    return pipeBacklog() == written;
}

std::string ChildProcess::stop(bool gently) {
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
    if (r == pid_) how = describeExitStatus(status);
    if (!exited && r == pid_ && WIFSIGNALED(status)) how = "did not exit, " + how;
    if (fromChild_ >= 0) ::close(fromChild_);
    fromChild_ = -1;
    pid_ = -1;
    inbuf_.clear();
    scanned_ = 0;
    outbox_.clear();
    return how;
}

bool ChildProcess::takeLine(std::string& line) {
    std::size_t nl = inbuf_.find('\n', scanned_);
    if (nl == std::string::npos) {
        scanned_ = inbuf_.size();
        return false;
    }
    line = inbuf_.substr(0, nl);
    inbuf_.erase(0, nl + 1);
    scanned_ = 0;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

ChildProcess::Io ChildProcess::next(Clock::time_point deadline, std::size_t maxLineBytes) {
    using Kind = Io::Kind;
    auto outcome = [](Kind kind, std::string error = {}) {
        Io io;
        io.kind = kind;
        io.error = std::move(error);
        return io;
    };
    if (pid_ <= 0) return outcome(Kind::StdoutClosed);
    for (;;) {
        Io io;
        if (takeLine(io.line)) {
            if (io.line.size() > maxLineBytes) return outcome(Kind::Oversized);
            return io;
        }
        if (inbuf_.size() > maxLineBytes) return outcome(Kind::Oversized);

        auto now = Clock::now();
        if (now >= deadline) return outcome(Kind::Timeout);
        auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
        int waitMs = remaining > INT_MAX ? INT_MAX : static_cast<int>(remaining);

        struct pollfd fds[2];
        nfds_t n = 0;
        int writeSlot = -1;
        if (!outbox_.empty() && toChild_ >= 0) {
            fds[n] = {toChild_, POLLOUT, 0};
            writeSlot = static_cast<int>(n++);
        }
        const int readSlot = static_cast<int>(n);
        fds[n++] = {fromChild_, POLLIN, 0};
        int ready = ::poll(fds, n, waitMs);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return outcome(Kind::Failed, std::string("poll: ") + std::strerror(errno));
        }
        if (writeSlot >= 0 && fds[writeSlot].revents != 0) {
            ssize_t w = writeNoSigpipe(toChild_, outbox_.data(), outbox_.size());
            if (w > 0) {
                outbox_.erase(0, static_cast<std::size_t>(w));
            } else if (w < 0 && errno == EPIPE) {
                return outcome(Kind::StdinClosed);
            } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return outcome(Kind::Failed, std::string("write: ") + std::strerror(errno));
            }
        }
        if (fds[readSlot].revents != 0) {
            // Never hold more than one line's limit plus a chunk.
            char chunk[kReadChunk];
            ssize_t r = ::read(fromChild_, chunk, sizeof chunk);
            if (r > 0) {
                inbuf_.append(chunk, static_cast<std::size_t>(r));
            } else if (r == 0) {
                return outcome(Kind::StdoutClosed);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return outcome(Kind::Failed, std::string("read: ") + std::strerror(errno));
            }
        }
    }
}

}  // namespace remit
