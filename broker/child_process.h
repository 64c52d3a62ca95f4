// A child process the broker talks to over pipes, one line at a time: the plumbing shared by
// adapter processes (broker/process_adapter.h, `--adapter CMD` and `--live`) and MCP servers over
// stdio (broker/mcp_client.h, `--adapter mcp:CMD` and `remitc import mcp`). spawnProcess, which
// starts them, also starts the web inbox's resumes (cli/resume_jobs.h).
//
// Hygiene (docs/adapters.md "Process hygiene"): no shell (argv from splitCommand, execvp
// semantics); its own process group, default signal dispositions and no blocked signals; only
// stdin, stdout and stderr inherited; stderr passed through, or appended to a log file. Stopping it
// closes its stdin, gives it a grace period, then SIGTERM and SIGKILL to its whole group, and
// reaps it. Nothing blocks: every wait is a poll() bounded by a deadline, writes never raise
// SIGPIPE, and no more than one line's limit plus a chunk of its output is ever held.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace remit {

// Splits an operator's command line into argv without a shell: words separated by blanks,
// '…' literal, "…" with \" \\ \$ \` escapes, \x outside quotes. Unquoted | ; & < > ( ) $ ` are
// refused (there is no shell; write `sh -c '…'` to get one). False with `error` set on failure.
bool splitCommand(const std::string& command, std::vector<std::string>& argv, std::string& error);

// Whether `program` (a name looked up on PATH, or a path with a slash) is an executable regular file.
bool findOnPath(const std::string& program);

// Checks that argv[0] can be run from `workingDir` (empty: here), as a spawn would find it; false
// with `error` saying why ("WHAT program 'x' not found on PATH", "… is a directory, not a
// program", "the WHAT command is empty"), `what` being "adapter" or "MCP server".
bool checkProgram(const std::vector<std::string>& argv, const std::string& workingDir, const char* what,
                  std::string& error);

// argv as a person would type it, quoted where needed: for messages.
std::string quoteForDisplay(const std::vector<std::string>& argv);

// "exit status 3", "killed by signal SIGKILL": a wait status, for messages.
std::string describeExitStatus(int status);

// A short, printable-ASCII excerpt of hostile bytes for messages (which end up in JSON traces):
// every byte outside 0x20–0x7e becomes '?', and more than `max` bytes end in "...".
std::string printableExcerpt(std::string_view bytes, std::size_t max = 80);

// The descriptors a child gets as its stdin, stdout and stderr; -1 inherits the parent's. A
// non-empty errPath instead appends its stderr to that file (created 0600 if needed).
struct ChildFds {
    int in = -1, out = -1, err = -1;
    std::string errPath = {};
};
// Starts argv[0] (execvp semantics: PATH lookup) with `argv`, the parent's environment, `fds`, every
// other descriptor closed, in `workingDir` when it is not empty, in its own process group, with no
// signal blocked and default dispositions. Returns 0 with `pid` set, or the error number.
int spawnProcess(const std::vector<std::string>& argv, const ChildFds& fds, const std::string& workingDir,
                 pid_t& pid);

struct ChildProcessOptions {
    // The directory the process starts in (empty: the caller's).
    std::string workingDir;
    // Where its stderr goes: empty inherits ours; otherwise the file is created if needed and
    // appended to.
    std::string stderrPath;
    // On a gentle stop: how long it may take to exit after its stdin closes, then after SIGTERM,
    // before SIGKILL.
    uint64_t exitGraceMs = 100;
    uint64_t termGraceMs = 500;
};

class ChildProcess {
public:
    using Clock = std::chrono::steady_clock;

    ChildProcess(std::vector<std::string> argv, ChildProcessOptions options);
    ~ChildProcess();  // stop(true)
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    const std::vector<std::string>& argv() const { return argv_; }
    const std::string& display() const { return display_; }  // quoteForDisplay(argv)
    bool running() const { return pid_ > 0; }

    // Starts it; false with `error` saying why (the system's words, e.g. "No such file or
    // directory"). Pending output and input are dropped.
    bool start(std::string& error);
    // Whether it has exited (without reaping it).
    bool hasExited() const;
    // Stops it (gently: close its stdin and give it exitGraceMs first; else SIGTERM at once), kills
    // what is left of its process group, reaps it, and returns how it ended ("" if unknown).
    std::string stop(bool gently);

    // Queues bytes for its stdin; next() writes them (in order) while it reads.
    void send(std::string_view bytes) { outbox_.append(bytes); }
    // Bytes queued but not written yet.
    std::size_t unsent() const { return outbox_.size(); }
    // After it ended mid-request (next() said StdoutClosed or StdinClosed, before stop()): whether
    // none of the last `written` bytes written to its stdin were read, so the request reached
    // nobody (docs/adapters.md, "Delivered or not"). Nothing written is nothing read. Otherwise
    // the bytes still in the pipe tell (FIONREAD answers on its write end too, and the pipe keeps
    // its bytes while that end is open): all of them there means nobody read any. To make that
    // final, a request that looks unread is measured again after its process group is killed, so
    // nobody can read it in between; a process killed by SIGKILL runs no more of its own code, so
    // bytes taken in by a read already under way are never acted upon. A descendant that left the
    // process group and kept its stdin is beyond this: it could still read.
    bool stdinUnread(std::size_t written);

    // What next() found.
    struct Io {
        enum class Kind : uint8_t {
            Line,          // `line` is the next line of its stdout (no newline, a trailing '\r' removed)
            Timeout,       // the deadline passed first
            StdoutClosed,  // end of its stdout (it exited, or closed it)
            StdinClosed,   // a write failed with EPIPE: it no longer reads its stdin
            Oversized,     // a line longer than the limit (its bytes are not kept)
            Failed,        // poll/read/write failed: `error` says how
        } kind = Kind::Line;
        std::string line;
        std::string error;
    };
    // Writes queued bytes and reads until a complete line is available (possibly before everything
    // queued is written), the deadline passes, or a pipe closes. Buffered lines come first.
    Io next(Clock::time_point deadline, std::size_t maxLineBytes);

private:
    std::vector<std::string> argv_;
    std::string display_;
    ChildProcessOptions options_;
    pid_t pid_ = -1;
    int toChild_ = -1;
    int fromChild_ = -1;
    std::string inbuf_;
    std::size_t scanned_ = 0;
    std::string outbox_;

    bool waitExited(uint64_t ms) const;
    std::size_t pipeBacklog() const;
    bool takeLine(std::string& line);
};

}  // namespace remit
