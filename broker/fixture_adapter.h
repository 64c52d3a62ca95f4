// The fixture adapter (docs/broker.md "Fixture files"): canned results for offline
// runs and tests, from a JSON file such as `fixtures/run.json`:
//   {"_note": "...", "approve_all": bool,
//    "capabilities": {"res": [ENTRY...]}, "models": {"model": [ENTRY...]}, "model": [ENTRY...]}
// A capability entry has `args` (subset match, Python `==`, so 1 == 1.0), `output` | `error`,
// `error_code` (ours: CapabilityFailed | Timeout | ModelOutputInvalid), `cost_usd`, `repeat`. A
// model entry has `agent`, `match` (substring of the rendered prompt), `output` | `answer` (a
// scalar shaped to the schema) | `error`, `error_code`, `cost_usd` (default 0), `repeat`.
// Selection: the first entry, in file order, that is unused (or `repeat`) and matches; it is then
// marked used. No entry: CapabilityFailed `no fixture for …` (operational: retry and else apply).
// Models use `models.<name>` when present, else the shared `model` list, each model keeping its
// own used flags.
//
// The file is validated when it is loaded, so a malformed fixture stops the command (exit 2)
// before the run starts, with the file, the JSON path of the problem and a hint — never halfway.
// Unknown keys are ignored, as the prototype ignores them (its files must keep working).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/adapter.h"
#include "runtime/json_text.h"

namespace remit {

struct HostModel;

// The largest fixture file read (as for an inputs file).
constexpr size_t kMaxFixtureBytes = size_t(64) << 20;

class FixtureAdapter final : public Adapter {
public:
    // Reads and validates `path`. On failure returns null with `error` (naming the file) and `hint`.
    static std::unique_ptr<FixtureAdapter> load(const std::string& path, std::string& error, std::string& hint);
    // Validates an already parsed document; `file` names it in messages.
    static std::unique_ptr<FixtureAdapter> fromJson(nlohmann::json doc, const std::string& file, std::string& error,
                                                    std::string& hint);
    // An adapter with no entries: every call fails with `no fixture for …`.
    static std::unique_ptr<FixtureAdapter> empty();

    // Compares the capability entries with the host interface: an entry whose `args` names a
    // parameter its capability does not take could never match a call, so it is refused before
    // the run (exit 2), with the file, the JSON path, the capability's parameters and a close name.
    bool checkAgainst(const HostModel& host, std::string& error, std::string& hint) const;

    AdapterReply perform(const AdapterRequest& request) override;
    // Marks the entry the call would have used, so a resumed run's next call gets the next one.
    void replayed(const AdapterRequest& request) override { perform(request); }
    const char* kind() const override { return "fixture"; }
    bool approveAll() const { return doc_.value("approve_all", false); }

private:
    nlohmann::json doc_;
    std::string file_;  // as messages name it
    std::map<std::string, std::vector<bool>> used_;  // "m:" + model -> per-entry flag
    // The capability entries as call() reads them, made once by index() when the file is loaded:
    // per resource, each entry of doc_ (which stays unchanged) with what a call needs of it.
    struct CapabilityEntry {
        const nlohmann::json* entry = nullptr;
        const nlohmann::json* args = nullptr;  // its `args`, or null
        Json output;                           // its `output` as a Json (null when it has none)
        std::optional<double> costUsd;
        bool repeat = false;
        bool used = false;
    };
    std::map<std::string, std::vector<CapabilityEntry>, std::less<>> capabilities_;
    std::vector<CapabilityEntry> noEntries_;  // a resource the file has no entries for

    void index();

    AdapterReply call(const AdapterRequest& request);
    AdapterReply ask(const AdapterRequest& request);
};

// The prototype's `shape`: a fixture `answer` fitted to the requested JSON Schema.
Json shapeAnswer(const nlohmann::json& answer, const Json& schema);
// Python's `==` on JSON values: numbers compare by value across int and float; otherwise
// structural. (Unlike Python, `true == 1` is false: a fixture should not match by accident.)
bool pyJsonEqual(const nlohmann::json& a, const nlohmann::json& b);
bool pyJsonEqual(const Json& a, const nlohmann::json& b);

}  // namespace remit
