// See trace.h. Reading is hostile-input safe: the non-throwing parser, and every field read with
// a type check (a hand-edited trace must not crash `remitvm trace`).
#include "broker/trace.h"
#include "runtime/numfmt.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/canonical_json.h"
#include "runtime/hash.h"
#include "runtime/files.h"
#include "runtime/json_text.h"

namespace remit {

namespace {

// The largest trace read back: every call's arguments and result, for runs far longer than any
// bounded program makes.
constexpr size_t kMaxTraceBytes = size_t(1) << 30;

}  // namespace

TraceWriter::~TraceWriter() {
    if (fd_ >= 0) {
        flush();  // a held write-ahead record (a store's writer flushes its own before this runs)
        ::close(fd_);
    }
}

namespace {

// fsync of a directory, so that a file just created in it survives a crash (its entry is durable).
bool syncDirectory(const std::filesystem::path& dir) {
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

std::string traceChain(std::string_view previousChain, std::string_view canonicalRecord) {
    return sha256Hex(previousChain, canonicalRecord, 32);
}

bool TraceWriter::open(const std::string& path, std::string& error) {
    std::error_code ec;
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) {
        error = fmt::format("cannot create directory {} ({})", p.parent_path().string(), ec.message());
        return false;
    }
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0 || (synced_ && !syncDirectory(p.parent_path()))) {
        error = fmt::format("cannot write the trace {} ({})", path, std::strerror(errno));
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        return false;
    }
    path_ = path;
    return true;
}

bool TraceWriter::fail(std::string why) {
    if (ok_) failure_ = std::move(why);
    ok_ = false;
    return false;
}

CanonicalObject TraceWriter::canonicalRecord(const Json& event) {
    CanonicalObject record;
    if (event.is_object())
        for (auto it = event.begin(); it != event.end(); ++it) record.add(it.key(), it.value());
    return record;
}

bool TraceWriter::append(const CanonicalObject& event, bool durable, bool hold) {
    if (!attached()) return true;  // not opened: tests without a trace
    if (!ok_) return false;
    ++emitted_;
    // The chain covers the record without its own `chain` member (for the broker's records, the
    // record's own buffer: nothing is copied to hash it); the line is the same text with it, built
    // once into line_, whose buffer is reused from record to record.
    std::string scratch;
    std::string chain = traceChain(chain_, event.textWithout("chain", scratch));
    event.textWithInto(line_, "chain", chain);
    line_ += '\n';
    if (failAt_ && emitted_ >= failAt_) return fail(std::strerror(failErrno_));
    if (hold) {
        held_.swap(line_);  // line_ takes held_'s old buffer for the next record
        chain_ = std::move(chain);
        return true;
    }
    std::string_view lines[2] = {held_, line_};
    std::span<const std::string_view> all = held_.empty() ? std::span<const std::string_view>(lines + 1, 1)
                                                          : std::span<const std::string_view>(lines, 2);
    if (std::string why; !writeLines(all, durable, why)) return fail(std::move(why));
    held_.clear();
    chain_ = std::move(chain);
    return true;
}

bool TraceWriter::flush() {
    if (held_.empty() || !attached()) return ok_;
    if (!ok_) return false;
    std::string_view line = held_;
    if (std::string why; !writeLines(std::span<const std::string_view>(&line, 1), false, why))
        return fail(std::move(why));
    held_.clear();
    return true;
}

bool TraceWriter::writeLines(std::span<const std::string_view> lines, bool durable, std::string& why) {
    constexpr size_t kParts = 2;  // a held write-ahead record and the record after it
    if (lines.size() > kParts)
        return writeLines(lines.first(kParts), false, why) && writeLines(lines.subspan(kParts), durable, why);
    iovec parts[kParts];
    size_t count = 0;
    for (std::string_view line : lines) parts[count++] = iovec{const_cast<char*>(line.data()), line.size()};
    // A partial write continues where it stopped.
    for (size_t first = 0; first < count;) {
        ssize_t n = ::writev(fd_, parts + first, static_cast<int>(count - first));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            why = std::strerror(n < 0 ? errno : ENOSPC);
            return false;
        }
        auto done = static_cast<size_t>(n);
        for (; first < count && done >= parts[first].iov_len; ++first) done -= parts[first].iov_len;
        if (first < count) {
            parts[first].iov_base = static_cast<char*>(parts[first].iov_base) + done;
            parts[first].iov_len -= done;
        }
    }
    return !durable || syncLines(why);
}

bool TraceWriter::sync() {
    if (!attached()) return true;
    if (!flush()) return false;
    if (std::string why; !syncLines(why)) return fail(std::move(why));
    return true;
}

bool TraceWriter::syncLines(std::string& why) {
    if (!synced_ || ::fsync(fd_) == 0) return true;
    why = std::strerror(errno);
    return false;
}

bool isRunId(const std::string& s) {
    // YYYYMMDD-HHMMSS-xxxxxx
    if (s.size() != 22 || s[8] != '-' || s[15] != '-') return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i == 8 || i == 15) continue;
        char c = s[i];
        bool ok = i > 15 ? (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') : c >= '0' && c <= '9';
        if (!ok) return false;
    }
    return true;
}

bool isLowerHex(const std::string& s, size_t n) {
    return s.size() == n &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

TraceFile readTrace(const std::string& path, TraceCheck check, size_t maxRecords) {
    // A regular file of bounded size (runtime/files.h): a FIFO or a device is an error, not a hang.
    std::string text;
    if (std::optional<FileProblem> problem = readRegularFile(path, kMaxTraceBytes, text)) {
        TraceFile out;
        out.error = problem->message;
        return out;
    }
    return readTraceText(std::move(text), path, check, maxRecords);
}

TraceFile readTraceText(std::string text, const std::string& path, TraceCheck check, size_t maxRecords) {
    TraceFile out;
    std::istringstream in(std::move(text));
    auto damaged = [&](size_t lineNo, const std::string& what) {
        out.error = fmt::format("{}:{}: {}", path, lineNo, what);
        out.events.clear();
        out.lines.clear();
        return out;
    };
    std::string line, chain;
    bool chained = true;  // false: a trace written before chains, read with AllowUnchained
    size_t lineNo = 0;
    while (out.events.size() < maxRecords && std::getline(in, line)) {
        ++lineNo;
        bool complete = !in.eof();  // the line ended with a newline
        // Nesting is bounded before the line is parsed (runtime/json_text.h): the events are copied
        // and compared recursively later.
        if (jsonNestsDeeperThan(line, kMaxJsonNesting))
            return damaged(lineNo, fmt::format("the event is nested deeper than {} levels", kMaxJsonNesting));
        nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
        if (event.is_discarded() && !complete) {
            // The last line, without its newline. A write cut short leaves a prefix of a record,
            // which never parses; a whole record followed by a stray byte is damage (its newline
            // was overwritten), not a cut.
            size_t close = line.rfind('}');
            nlohmann::json head = close == std::string::npos || close + 1 == line.size()
                                      ? nlohmann::json()
                                      : nlohmann::json::parse(line.substr(0, close + 1), nullptr, false);
            if (!head.is_discarded() && head.is_object())
                return damaged(lineNo, "damaged record: stray bytes where the line should end");
            out.warning = fmt::format("{}:{}: the last line is cut short (the run stopped while writing it); it is "
                                      "ignored",
                                      path, lineNo);
            break;
        }
        if (event.is_discarded() || !event.is_object() || !event.contains("event") || !event["event"].is_string())
            return damaged(lineNo, "not a trace event (expected one JSON object with an \"event\" per line)");
        // Canonical form, byte for byte: every other spelling of the same record is an edit, and
        // with it every changed byte changes the value the chain covers.
        if (canonicalJson(event) != line) return damaged(lineNo, "damaged record: it is not in the canonical form remitvm writes");
        auto c = event.find("chain");
        if (lineNo == 1 && c == event.end()) {
            out.unchained = true;
            if (check == TraceCheck::Verify)
                return damaged(lineNo, "the trace has no record checksums (\"chain\"), so it cannot be verified; it "
                                       "was written by an older remitvm or edited");
            chained = false;
            out.warning = fmt::format("{}: the trace has no record checksums (\"chain\"); it is shown unverified", path);
        }
        if (!chained) event.erase("chain");
        if (chained) {
            if (c == event.end() || !c->is_string())
                return damaged(lineNo, "damaged record: it has no \"chain\" checksum");
            std::string recorded = c->get<std::string>();
            event.erase("chain");
            std::string expected = traceChain(chain, canonicalJson(event));
            if (recorded != expected)
                return damaged(lineNo, "damaged record: its checksum does not match (a byte changed, or a record "
                                       "before it is missing)");
            chain = std::move(recorded);
        }
        out.events.push_back(std::move(event));
        out.lines.push_back(lineNo);
    }
    if (in.bad()) return damaged(lineNo + 1, "cannot read the rest of the trace");
    return out;
}

RunLock::~RunLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

bool RunLock::acquire(const std::string& path, std::string& error) {
    std::error_code ec;
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        error = fmt::format("cannot open the run lock {}", path);
        return false;
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        fd_ = -1;
        error = fmt::format("another remitvm is running or resuming this run (it holds {})", path);
        return false;
    }
    return true;
}

namespace {

std::string str(const nlohmann::json& e, const char* key) {
    auto it = e.find(key);
    if (it == e.end() || it->is_null()) return "";
    if (it->is_string()) return it->get<std::string>();
    return dumpJson(*it, JsonTextStyle{false, false, -1, ", ", ": "});
}

std::string compact(const nlohmann::json& v, size_t maxChars) {
    std::string s = dumpJson(v, JsonTextStyle{false, false, -1, ", ", ": "});
    if (s.size() > maxChars) {
        size_t cut = maxChars;
        while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
        s = s.substr(0, cut) + "…";
    }
    return s;
}

std::string usd(const nlohmann::json& e, const char* key) {
    auto it = e.find(key);
    return it != e.end() && it->is_number() ? "$" + formatUsd(it->get<double>()) : "$?";
}

std::string tagList(const nlohmann::json& tags) {
    if (!tags.is_array() || tags.empty()) return "";
    std::string out;
    for (const auto& t : tags)
        if (t.is_string()) out += (out.empty() ? "" : ", ") + t.get<std::string>();
    return out;
}

std::string approvalLine(const nlohmann::json& call) {
    auto it = call.find("approval");
    if (it == call.end() || !it->is_object()) return "";
    std::string reasons;
    if (auto r = it->find("reasons"); r != it->end() && r->is_array())
        for (const auto& x : *r)
            if (x.is_string()) reasons += (reasons.empty() ? "" : "; ") + x.get<std::string>();
    return fmt::format("approved by {} (digest {}; {})", str(*it, "approved_by"), str(*it, "digest").substr(0, 16),
                       reasons);
}

std::string callLine(const nlohmann::json& e) {
    std::string line = fmt::format("#{} call {} @ {}", str(e, "seq"), str(e, "resource"), str(e, "site"));
    if (auto a = e.find("attempt"); a != e.end() && a->is_number_integer() && a->get<int64_t>() > 0)
        line += fmt::format(" (attempt {})", a->get<int64_t>() + 1);
    if (auto r = e.find("replayed"); r != e.end() && r->is_boolean() && r->get<bool>()) line += " (replayed)";
    line += fmt::format(" {}", str(e, "status"));
    line += fmt::format("  cost {}", usd(e, "cost_usd"));
    return line;
}

}  // namespace

std::string renderTimeline(const std::vector<nlohmann::json>& events, size_t maxValueChars) {
    std::ostringstream out;
    // A dispatch is shown only while its outcome is unknown: its call event tells the rest.
    std::set<std::string> recorded;
    for (const nlohmann::json& e : events)
        if (e["event"] == "call" || e["event"] == "not_delivered") recorded.insert(str(e, "idempotency_key"));
    for (const nlohmann::json& e : events) {
        std::string kind = e["event"].get<std::string>();
        if (kind == "run_start") {
            out << fmt::format("run {}  program {} ({})  mode {}\n", str(e, "run_id"), str(e, "program"),
                               str(e, "path"), str(e, "mode"));
            if (e.contains("resumed_from"))
                out << fmt::format("  resumed from {} (replaying {} recorded call(s))\n", str(e, "resumed_from"),
                                   str(e, "replaying"));
            if (e.contains("inputs")) out << fmt::format("  inputs: {}\n", compact(e["inputs"], maxValueChars));
        } else if (kind == "dispatch") {
            if (!recorded.count(str(e, "idempotency_key")))
                out << fmt::format("in flight: {} @ {} was dispatched (key {}) and its outcome never recorded; a resume "
                                   "sends it again with the same key\n",
                                   str(e, "resource"), str(e, "site"), str(e, "idempotency_key"));
        } else if (kind == "call") {
            out << callLine(e) << "\n";
            if (e.contains("args")) out << fmt::format("    args: {}\n", compact(e["args"], maxValueChars));
            if (auto f = e.find("in_flight_retry"); f != e.end() && f->is_object())
                out << fmt::format("    sent again: it was in flight when run {} stopped\n", str(*f, "run_id"));
            if (auto d = e.find("derived_from"); d != e.end() && d->is_array() && !d->empty())
                out << fmt::format("    derived from: {}\n", compact(*d, maxValueChars));
            if (std::string a = approvalLine(e); !a.empty()) out << "    " << a << "\n";
            if (str(e, "status") == "ok") {
                out << fmt::format("    result: {}\n",
                                   e.contains("result") ? compact(e["result"], maxValueChars) : "null");
                if (auto t = e.find("result_tags"); t != e.end() && !tagList(*t).empty())
                    out << fmt::format("    result tags: {}\n", tagList(*t));
            } else if (auto err = e.find("error"); err != e.end() && err->is_object()) {
                out << fmt::format("    error[{}]: {}\n", str(*err, "code"), str(*err, "message"));
            }
        } else if (kind == "not_delivered") {
            out << fmt::format("not delivered: {} @ {} (key {}) did not reach the adapter: {}; nothing was sent\n",
                               str(e, "resource"), str(e, "site"), str(e, "idempotency_key"),
                               str(e, "error"));
            if (auto a = e.find("approval"); a != e.end() && a->is_object())
                out << fmt::format("    the approval by {} (digest {}) {}\n", str(*a, "approved_by"),
                                   str(*a, "digest").substr(0, 16),
                                   a->value("kept", false) ? "is kept for the attempt that reaches it"
                                                           : "was not in the store to keep");
        } else if (kind == "violation") {
            out << fmt::format("violation: {} @ {} parameter '{}' received {}\n", str(e, "resource"), str(e, "site"),
                               str(e, "param"), tagList(e.value("tags", nlohmann::json::array())));
        } else if (kind == "pending_approval") {
            out << fmt::format("pending approval: {} @ {} digest {}\n    args: {}\n", str(e, "resource"),
                               str(e, "site"), str(e, "digest"),
                               e.contains("args") ? compact(e["args"], maxValueChars) : "{}");
        } else if (kind == "approval_denied") {
            out << fmt::format("approval denied: {} @ {} digest {} by {}{}\n", str(e, "resource"), str(e, "site"),
                               str(e, "digest").substr(0, 16), str(e, "denied_by"),
                               str(e, "reason").empty() ? "" : ": " + str(e, "reason"));
        } else if (kind == "approval_granted") {
            out << fmt::format("approval granted: digest {} by {}\n", str(e, "digest").substr(0, 16),
                               str(e, "approved_by"));
        } else if (kind == "invalid_output") {
            out << fmt::format("invalid output: {} @ {}: {}\n", str(e, "resource"), str(e, "site"), str(e, "message"));
        } else if (kind == "fallback") {
            out << fmt::format("fallback @ {} after: {}\n", str(e, "site"), str(e, "error"));
        } else if (kind == "run_end") {
            std::string status = str(e, "status");
            if (status == "ok")
                out << fmt::format("end: ok, spent {}, result {}\n", usd(e, "spent_usd"),
                                   e.contains("result") ? compact(e["result"], maxValueChars) : "null");
            else if (status == "pending_approval")
                out << fmt::format("end: paused for approval (digest {})\n", str(e, "digest"));
            else
                out << fmt::format("end: error[{}] {}\n", str(e, "code"), str(e, "message"));
        } else {
            out << fmt::format("{}: {}\n", kind, compact(e, maxValueChars));
        }
    }
    return out.str();
}

std::string renderWhy(const std::vector<nlohmann::json>& events, uint64_t seq, std::string& error,
                      size_t maxValueChars) {
    // The last call event with each seq (a run's seq ids are unique; replayed copies take new ones).
    std::map<uint64_t, const nlohmann::json*> calls;
    const nlohmann::json* start = nullptr;
    for (const nlohmann::json& e : events) {
        if (e["event"] == "run_start") start = &e;
        if (e["event"] == "call")
            if (auto s = e.find("seq"); s != e.end() && s->is_number_unsigned()) calls[s->get<uint64_t>()] = &e;
    }
    if (!calls.count(seq)) {
        error = fmt::format("this run has no call #{} (it has {} call event(s))", seq, calls.size());
        return "";
    }
    std::ostringstream out;
    std::set<uint64_t> shown;
    // Iterative depth-first walk: (seq, depth), children pushed in reverse to print in order.
    std::vector<std::pair<uint64_t, size_t>> stack{{seq, 0}};
    while (!stack.empty()) {
        auto [id, depth] = stack.back();
        stack.pop_back();
        std::string indent(depth * 2, ' ');
        auto found = calls.find(id);
        if (found == calls.end()) {
            out << indent << fmt::format("#{} (not in this trace)\n", id);
            continue;
        }
        const nlohmann::json& e = *found->second;
        if (!shown.insert(id).second) {
            out << indent << fmt::format("#{} {} @ {} (shown above)\n", id, str(e, "resource"), str(e, "site"));
            continue;
        }
        out << indent << callLine(e) << "\n";
        if (e.contains("args")) out << indent << fmt::format("    args: {}\n", compact(e["args"], maxValueChars));
        if (auto t = e.find("arg_tags"); t != e.end() && t->is_object())
            for (auto it = t->begin(); it != t->end(); ++it)
                if (!tagList(it.value()).empty())
                    out << indent << fmt::format("    '{}' is {}\n", it.key(), tagList(it.value()));
        if (auto t = e.find("pc_tags"); t != e.end() && !tagList(*t).empty())
            out << indent << fmt::format("    control flow: {}\n", tagList(*t));
        if (std::string a = approvalLine(e); !a.empty()) out << indent << "    " << a << "\n";
        std::vector<uint64_t> parents;
        if (auto d = e.find("derived_from"); d != e.end() && d->is_array())
            for (const auto& p : *d)
                if (p.is_number_unsigned()) parents.push_back(p.get<uint64_t>());
        if (parents.empty()) {
            out << indent << "    derived only from the run's inputs and the program's constants";
            if (start && start->contains("inputs")) out << ": " << compact((*start)["inputs"], maxValueChars);
            out << "\n";
        } else {
            out << indent << "    derived from:\n";
            for (auto it = parents.rbegin(); it != parents.rend(); ++it) stack.push_back({*it, depth + 2});
        }
    }
    return out.str();
}

}  // namespace remit
