// The small JSON files a state directory shares between processes — the approval store
// (broker/approvals.h) and the budget ledger (broker/budget.h) — are changed the same way: under
// an exclusive flock on `<file>.lock`, re-read, then replaced atomically through `<file>.tmp`.
//
// Invariants:
// - No lock, no write: a lock that cannot be taken is an error and nothing is changed.
// - A replacement is written, fsynced and renamed over the file (its directory then synced), so a
//   crash leaves the old file or the new one, and a writer killed half-way leaves at most
//   `<file>.tmp`, which the next writer truncates and reuses.
#pragma once

#include <string>

namespace remit {

// Holds `<path>.lock` exclusively while alive. flock needs no write access, so the file is opened
// read-only (a lock file made by another user still locks).
class StateFileLock {
public:
    // `what` names the file in the error ("the approval store").
    StateFileLock(const std::string& path, const std::string& what, std::string& error);
    ~StateFileLock();
    StateFileLock(const StateFileLock&) = delete;
    StateFileLock& operator=(const StateFileLock&) = delete;
    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// Replaces `path` with `text` durably (see above). False with `why` (strerror) on failure; the
// temporary file is removed then. Leftover `<file>.tmp<pid>` files of earlier versions are removed.
bool replaceStateFile(const std::string& path, const std::string& text, std::string& why);

// The current time as a Unix time with a fraction, as the stores record it (`at`).
double unixNow();

}  // namespace remit
