// Run traces: one JSONL file per run at
// `<state>/runs/<run_id>.jsonl`, one event per line in canonical JSON (sorted keys, compact), the
// prototype's events and fields plus ours (`dispatch`, `approval_granted`; `attempt`, `k`,
// `result_tags`, `adapter` on calls; `host_hash`/`policy_hash` on run_start) and, on every record,
// `chain`: a hash chain over the records (docs/broker.md "Traces"), so a damaged record is refused,
// never acted on. Written by the front end that runs the program (run_start and run_end:
// cli/run_commands.cpp, cli/mcp_tools.cpp, session/embed.cpp) and by the broker (every event of a
// call); read by `remitvm trace`, `approve RUN_ID`, resume and replay.
//
// Invariants:
// - The file is created (truncated) when the run starts and only appended to afterwards.
// - Every event goes to the OS with write(2) as soon as it is emitted; sync() fsyncs it, and
//   emitDurable() writes and syncs as one step. The broker writes the `dispatch` record with
//   emitWriteAhead before every dispatch and does not dispatch when that fails (in the PostgreSQL
//   store too: session/pg_store.cpp commits it waiting for the disk). A
//   trace of a fixture run is opened without syncs (setSynced(false)): its calls have no effect in
//   the world to keep a record of, so only a crash of the whole machine can lose its tail
//   (docs/broker.md, "Durability"). In such a trace the write-ahead record is the one record not
//   written at once: it goes out with the next record (the call's outcome) in one write.
// - After the first failed write or fsync the writer is dead: nothing more is written (a record
//   after a partial one would turn a cut-short tail into damage in the middle of the file), and
//   every later emit() and sync() returns false.
// - Reading verifies every record: canonical form, its `chain`, an `event` name. Only a last line
//   cut short (no newline, not a complete record) is tolerated, as a warning.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "runtime/canonical_json.h"
#include "runtime/json_text.h"

namespace remit {

class TraceWriter {
public:
    TraceWriter() = default;
    virtual ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    // Before open(): false makes sync() and open() skip fsync (a fixture run's trace). Writes still
    // go to the OS at once, so a killed process loses nothing; a machine that crashes may.
    void setSynced(bool synced) { synced_ = synced; }
    // Creates the file's directories and truncates the file, durably (its directory is synced).
    // False (with `error`) on failure.
    bool open(const std::string& path, std::string& error);
    // Appends one event (plus its `chain` field) as a canonical JSON line. False if it could not
    // be written completely, or if an earlier write failed.
    bool emit(const Json& event) { return append(canonicalRecord(event), false); }
    // The same for a record built as canonical text (the broker's per-call records): it is
    // serialised once, and its `chain` member goes into that text.
    bool emit(const CanonicalObject& event) { return append(event, false); }
    // emit() then sync(), as one step: the event and everything before it on stable storage (the
    // write-ahead `dispatch` record; one transaction in the PostgreSQL store, not two).
    bool emitDurable(const Json& event) { return append(canonicalRecord(event), true); }
    bool emitDurable(const CanonicalObject& event) { return append(event, true); }
    // The write-ahead record of a dispatch (the broker's `dispatch`): in a synced trace, emitDurable.
    // In a trace without syncs (a fixture run, whose calls have no effect) it is held and written
    // together with the next record, the call's outcome, in one writev — what a fixture call costs
    // is then one system call, not two. sync(), flush() and the destructor write a held record too.
    // A process killed between the two loses only the dispatch of a call that changed nothing;
    // its resume makes that call again, with the same key (docs/broker.md, "Durability").
    bool emitWriteAhead(const CanonicalObject& event) { return append(event, true, !synced_); }
    // Writes a held write-ahead record now (a store's writer calls it from its destructor).
    bool flush();
    // Forces what was written to stable storage. False if that failed, or if anything failed before.
    bool sync();
    bool ok() const { return ok_; }
    // Why the first write or fsync failed (strerror), empty while ok().
    const std::string& failure() const { return failure_; }
    // Where the records go, for messages: the file, or what another store names the trace by.
    const std::string& path() const { return path_; }
    // For tests: every write from the `n`-th emit() on fails with `errorNumber`, as a full disk would.
    void failFromEmit(size_t n, int errorNumber) {
        failAt_ = n;
        failErrno_ = errorNumber;
    }

protected:
    // Where the lines go. This class writes them to its file (writev(2), then fsync when `durable`
    // or on sync(), unless setSynced(false)); a store that keeps traces elsewhere (session/pg_store.cpp) overrides the
    // three. Each returns false with `why` (for failure()) when the line could not be kept.
    virtual bool attached() const { return fd_ >= 0; }  // false: emit and sync do nothing (tests)
    // Writes `lines` (each ending in a newline) in order: to the file, with one writev.
    virtual bool writeLines(std::span<const std::string_view> lines, bool durable, std::string& why);
    virtual bool syncLines(std::string& why);
    bool synced() const { return synced_; }
    std::string path_;

private:
    int fd_ = -1;
    std::string chain_;  // the last record's chain ("" before the first)
    bool ok_ = true;
    bool synced_ = true;
    std::string failure_;
    size_t emitted_ = 0;
    size_t failAt_ = 0;
    int failErrno_ = 0;
    std::string held_;  // a write-ahead record not written yet (emitWriteAhead), with its newline
    std::string line_;  // the line being written (a buffer reused by every record)
    bool fail(std::string why);
    bool append(const CanonicalObject& event, bool durable, bool hold = false);
    static CanonicalObject canonicalRecord(const Json& event);
};

// The `chain` of a record: the first 32 hex digits of SHA-256 of the previous record's chain ("" for
// the first record) followed by the record's canonical JSON without its `chain` field.
std::string traceChain(std::string_view previousChain, std::string_view canonicalRecord);

// A trace read back: its events (without `chain`) in file order with their line numbers. `error`
// names the file and line of the first record that is damaged — not one canonical JSON object with
// an "event", or its chain does not match (a byte changed, or a record before it was removed). A
// last line cut short (no newline, not a complete record) is what a process killed while writing
// leaves behind: it is dropped and reported in `warning`.
struct TraceFile {
    std::vector<nlohmann::json> events;
    std::vector<size_t> lines;
    std::string error;
    std::string warning;
    bool unchained = false;  // written before record checksums (refused, or shown unverified)
};
enum class TraceCheck {
    Verify,          // resume, replay, approve: a trace without chains is refused
    AllowUnchained,  // `remitvm trace`: one written before chains is shown, with a warning
};
// `maxRecords` stops after that many records (the first record alone names a run and its parent).
TraceFile readTrace(const std::string& path, TraceCheck check = TraceCheck::Verify,
                    size_t maxRecords = static_cast<size_t>(-1));
// The same on the bytes of a trace already read; `path` names it in messages. readTrace reads the
// file and calls this; the fuzz harness tests/fuzz/fuzz_trace.cpp feeds it any bytes.
TraceFile readTraceText(std::string text, const std::string& path, TraceCheck check = TraceCheck::Verify,
                        size_t maxRecords = static_cast<size_t>(-1));

// Ids read from files name paths (`runs/<id>.jsonl`, `runs/<root>.lock`), so they are checked
// against their exact formats before use. A run id: YYYYMMDD-HHMMSS-xxxxxx (6 lowercase hex).
bool isRunId(const std::string& s);
// `n` lowercase hex digits (approval digests: 64; idempotency keys: 32).
bool isLowerHex(const std::string& s, size_t n);

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

// How many characters of a value (arguments, results, inputs) a rendering shows before it cuts
// with "…"; `trace --full` shows them whole (kWholeValues), since the part cut off may be exactly
// what an approver must check.
constexpr size_t kTraceValueChars = 160;
constexpr size_t kWholeValues = SIZE_MAX;

// `remitvm trace`: a readable timeline of the events.
std::string renderTimeline(const std::vector<nlohmann::json>& events, size_t maxValueChars = kTraceValueChars);
// `remitvm trace RUN --why SEQ`: the call `seq` and, recursively, the calls its arguments derive
// from, with their approvals, down to the run's inputs. Empty with `error` set when there is no
// call event `seq`.
std::string renderWhy(const std::vector<nlohmann::json>& events, uint64_t seq, std::string& error,
                      size_t maxValueChars = kTraceValueChars);

}  // namespace remit
