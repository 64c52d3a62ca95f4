// Run traces (shared/DESIGN.md A5, shared/PROTOTYPE.md §2.6): one JSONL file per run at
// `<state>/runs/<run_id>.jsonl`, one event per line in canonical JSON (sorted keys, compact), the
// prototype's events and fields plus ours (`attempt`, `result_tags`, `adapter` on calls,
// `host_hash`/`policy_hash` on run_start, `approval_granted`). Written by the broker; read by
// `remitvm trace` (and by replay/resume).
//
// Invariants:
// - The file is created (truncated) when the run starts and only appended to afterwards.
// - Every event is flushed to the OS as soon as it is written, and fsync'ed before a dispatch, so
//   a crash during an effect leaves the trace with everything that led to it.
// - A trace that cannot be written stops nothing by itself, but `ok()` turns false and the CLI
//   reports it; a run refused before it starts never opens a trace.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace remit {

class TraceWriter {
public:
    TraceWriter() = default;
    ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    // Creates `<dir>/<file>`'s directories and truncates the file. False (with `error`) on failure.
    bool open(const std::string& path, std::string& error);
    // Appends one event as canonical JSON plus a newline and flushes it.
    void emit(const nlohmann::ordered_json& event);
    // Forces what was written to stable storage (before an effect is dispatched).
    void sync();
    bool ok() const { return ok_; }
    const std::string& path() const { return path_; }

private:
    std::FILE* file_ = nullptr;
    std::string path_;
    bool ok_ = true;
};

// A trace read back: its events in file order with their line numbers. `error` names the file and
// line of the first line that is not a JSON object. A last line cut short (no newline, not JSON) is
// what a process killed while writing leaves behind: it is dropped and reported in `warning`.
struct TraceFile {
    std::vector<nlohmann::json> events;
    std::vector<size_t> lines;
    std::string error;
    std::string warning;
};
TraceFile readTrace(const std::string& path);

// An exclusive lock on a run and its resumes (`<state>/runs/<idempotency_root>.lock`, flock): a
// run holds it while it can dispatch, so two resumes of one run cannot both perform a call. The
// kernel releases it when the process dies, however it dies.
class RunLock {
public:
    RunLock() = default;
    ~RunLock();
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;
    // False with `error` when another process holds the lock or the file cannot be opened.
    bool acquire(const std::string& path, std::string& error);

private:
    int fd_ = -1;
};

// `remitvm trace`: a readable timeline of the events.
std::string renderTimeline(const std::vector<nlohmann::json>& events);
// `remitvm trace RUN --why SEQ`: the call `seq` and, recursively, the calls its arguments derive
// from, with their approvals, down to the run's inputs. Empty with `error` set when there is no
// call event `seq`.
std::string renderWhy(const std::vector<nlohmann::json>& events, uint64_t seq, std::string& error);

}  // namespace remit
