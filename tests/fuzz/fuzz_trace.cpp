// libFuzzer harness for run traces (broker/trace.h): what `remitvm trace`, `approve RUN_ID`,
// `resume` and `replay` read back from `<state>/runs/`, a directory anyone with access to the state
// can edit. readTraceText (readTrace's reader, on bytes) must refuse every record that is not
// canonical JSON chained to the one before it, and the renderers and the replay planner
// (broker/replay.h) must survive whatever it lets through.
//
// The input is read as a trace in both check modes. Since the fuzzer cannot forge SHA-256, it is
// also resealed — every line that is a JSON object with an "event" rewritten in canonical form
// with the right chain, as TraceWriter would write it — so that the timeline, the --why view and
// the planner run on fuzzer-chosen events. The harness traps when a promise breaks:
//   - a read gives events and line numbers in step, or an error and nothing; every event is an
//     object with a string "event" and no "chain";
//   - a trace is accepted in Verify mode only when each record is canonical and its chain
//     verifies (checked here line by line, apart from the reader), with at most a last line cut
//     short left over, as a warning; what Verify accepts, AllowUnchained reads the same;
//   - a resealed trace is accepted whole (canonical form is a fixed point: what canonicalJson
//     writes parses back to the same canonical text);
//   - renderWhy either renders or says why not; planFromTrace either plans from a run_start or
//     says why not.
//
// Build and run: `scripts/fuzz trace SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_trace_replay FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "broker/replay.h"
#include "broker/trace.h"
#include "runtime/canonical_json.h"
#include "runtime/json_text.h"

namespace {

using namespace remit;

const std::string kPath = "runs/fuzz.jsonl";

[[noreturn]] void broken(const std::string& what, std::string_view input) {
    std::fprintf(stderr, "\n*** fuzz_trace: %s\n--- input (%zu bytes)\n%.*s\n---\n", what.c_str(), input.size(),
                 static_cast<int>(input.size()), input.data());
    __builtin_trap();
}

struct Line {
    std::string text;
    bool newline = false;  // ended with '\n'
};

std::vector<Line> splitLines(std::string_view text) {
    std::vector<Line> out;
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string_view::npos) {
            out.push_back({std::string(text.substr(start)), false});
            break;
        }
        out.push_back({std::string(text.substr(start, nl - start)), true});
        start = nl + 1;
    }
    return out;
}

// A line as the reader parses it, or discarded.
nlohmann::json parseLine(const std::string& line) {
    if (jsonNestsDeeperThan(line, kMaxJsonNesting)) return nlohmann::json(nlohmann::json::value_t::discarded);
    return nlohmann::json::parse(line, nullptr, false);
}

void checkShape(const TraceFile& t, std::string_view input) {
    if (t.events.size() != t.lines.size()) broken("events and line numbers out of step", input);
    if (!t.error.empty() && !t.events.empty()) broken("an error with events", input);
    for (size_t i = 0; i < t.events.size(); ++i) {
        const nlohmann::json& e = t.events[i];
        if (!e.is_object() || !e.contains("event") || !e["event"].is_string() || e.contains("chain"))
            broken("an event that is not an object with a string \"event\" and no chain", input);
        if (t.lines[i] == 0 || (i > 0 && t.lines[i] <= t.lines[i - 1]))
            broken("line numbers that do not increase", input);
    }
}

// The chain checked apart from the reader: every accepted record is line i + 1, canonical, and
// carries traceChain(previous chain, the record without its chain).
void checkVerified(const TraceFile& t, const std::vector<Line>& lines, std::string_view input) {
    std::string chain;
    for (size_t i = 0; i < t.events.size(); ++i) {
        if (t.lines[i] != i + 1 || i >= lines.size()) broken("an accepted record that is not the next line", input);
        nlohmann::json record = parseLine(lines[i].text);
        if (record.is_discarded() || !record.is_object() || canonicalJson(record) != lines[i].text)
            broken("an accepted record that is not canonical JSON", input);
        auto c = record.find("chain");
        if (c == record.end() || !c->is_string()) broken("an accepted record without a chain", input);
        std::string recorded = c->get<std::string>();
        record.erase("chain");
        if (record != t.events[i]) broken("an event that is not its record", input);
        std::string expected = traceChain(chain, canonicalJson(record));
        if (recorded != expected) broken("an accepted record whose chain does not verify", input);
        chain = recorded;
    }
    // What is left: nothing, or a last line without its newline that was reported as cut short.
    size_t left = lines.size() - t.events.size();
    if (left > 1 || (left == 1 && (lines.back().newline || t.warning.empty())))
        broken("records left unread without an error", input);
}

// Every line that parses as an object with a string "event" rewritten as TraceWriter writes it.
// Returns the new text and whether every line could be resealed.
std::pair<std::string, bool> reseal(const std::vector<Line>& lines) {
    std::string out, chain;
    bool whole = true;
    for (const Line& line : lines) {
        nlohmann::json record = parseLine(line.text);
        if (!line.text.empty() && line.text.find('\0') == std::string::npos && !record.is_discarded() &&
            record.is_object() && record.contains("event") && record["event"].is_string()) {
            record.erase("chain");
            chain = traceChain(chain, canonicalJson(record));
            record["chain"] = chain;
            out += canonicalJson(record);
        } else {
            whole = false;
            out += line.text;
        }
        if (line.newline) out += '\n';
    }
    return {out, whole};
}

void render(const TraceFile& t, std::string_view input) {
    volatile size_t sink = renderTimeline(t.events).size();
    std::vector<uint64_t> seqs = {0, 1, 2};
    for (const nlohmann::json& e : t.events)
        if (e.contains("seq") && e["seq"].is_number_unsigned() && seqs.size() < 8)
            seqs.push_back(e["seq"].get<uint64_t>());
    for (uint64_t seq : seqs) {
        std::string error;
        std::string why = renderWhy(t.events, seq, error);
        if (why.empty() && error.empty()) broken("renderWhy gave neither a view nor a reason", input);
        sink = sink + why.size();
    }
    for (ReplayPurpose purpose : {ReplayPurpose::Resume, ReplayPurpose::Replay}) {
        std::string error;
        ReplayPlan plan = planFromTrace(t, kPath, purpose, error);
        if (error.empty() && (!plan.start.is_object() || plan.start.value("event", "") != "run_start"))
            broken("a plan without a run_start", input);
        sink = sink + plan.calls.size() + plan.inFlight.size();
    }
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<Line> lines = splitLines(text);

    TraceFile verified = readTraceText(text, kPath, TraceCheck::Verify);
    checkShape(verified, text);
    TraceFile shown = readTraceText(text, kPath, TraceCheck::AllowUnchained);
    checkShape(shown, text);
    if (verified.error.empty()) {
        if (verified.unchained) broken("an unchained trace passed Verify", text);
        checkVerified(verified, lines, text);
        if (!shown.error.empty() || shown.events != verified.events)
            broken("AllowUnchained read a verified trace otherwise", text);
        render(verified, text);
    } else if (shown.error.empty()) {
        render(shown, text);
    }

    auto [resealed, whole] = reseal(lines);
    TraceFile again = readTraceText(resealed, kPath, TraceCheck::Verify);
    checkShape(again, resealed);
    if (whole) {
        if (!again.error.empty()) broken("a resealed trace was refused: " + again.error, resealed);
        if (again.events.size() != lines.size()) broken("a resealed trace lost records", resealed);
        checkVerified(again, splitLines(resealed), resealed);
    }
    if (again.error.empty()) render(again, resealed);
    return 0;
}
