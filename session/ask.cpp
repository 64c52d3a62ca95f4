// `remit ask`: see ask.h.
#include "session/ask.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "broker/replay.h"
#include "runtime/diagnostics.h"
#include "session/run_lifecycle.h"

namespace remit {

namespace {

// What the model is told it is doing (the prototype's instructions, in our words).
constexpr const char* kSystem =
    "You modify programs written in Remit, a small checked language. Return the COMPLETE revised program, not a "
    "patch. You cannot change the host interface or the policy. If the request needs authority the host does not "
    "grant, or would weaken a safety property, set refused to true, return the original program unchanged and "
    "explain why.";

std::vector<std::string> splitLines(std::string_view text) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) {
            lines.emplace_back(text.substr(start));
            break;
        }
        lines.emplace_back(text.substr(start, end - start + 1));
        start = end + 1;
    }
    return lines;
}

// The range of a hunk as unified diffs write it: "start,length", "start" for one line, and the
// line before for none.
std::string hunkRange(size_t start, size_t length) {
    if (length == 1) return fmt::format("{}", start + 1);
    if (length == 0) return fmt::format("{},0", start);
    return fmt::format("{},{}", start + 1, length);
}

}  // namespace

Json askProposalSchema() {
    return Json{{"type", "object"},
                {"properties",
                 {{"program", {{"type", "string"}}},
                  {"explanation", {{"type", "string"}}},
                  {"refused", {{"type", "boolean"}}}}},
                {"required", Json::array({"program", "explanation", "refused"})},
                {"additionalProperties", false}};
}

AskOutcome askForChange(const AskRequest& request, Adapter& model) {
    AskOutcome out;
    out.proposed = request.programText;
    const std::string shownName = std::filesystem::path(request.programPath).filename().string();
    std::string prompt = fmt::format(
        "Language reference:\n<spec>\n{}\n</spec>\n\nHost interface (read-only):\n<host>\n{}\n</host>\n\n{}"
        "Current program ({}):\n<program>\n{}\n</program>\n\nChange request: {}",
        request.spec, request.hostText,
        request.policyName ? fmt::format("Policy (read-only):\n<policy>\n{}\n</policy>\n\n", request.policyText) : "",
        shownName, request.programText, request.request);
    const std::string root = newRunId();
    SourceProvider sources = textSources(request.hostName, request.hostText, request.policyName, request.policyText);
    for (int round = 0; round <= request.maxRepairs; ++round) {
        AdapterRequest ask;
        ask.kind = AdapterRequest::Kind::Ask;
        ask.runId = root;
        ask.site = "ask";
        ask.idempotencyKey = idempotencyKey(root, "ask", static_cast<uint64_t>(round));
        ask.timeoutMs = request.timeoutMs;
        ask.model = request.model;
        ask.system = kSystem;
        ask.prompt = prompt;
        ask.renderedPrompt = prompt;
        ask.schema = askProposalSchema();
        ask.typeName = "Proposal";
        AdapterReply reply = model.perform(ask);
        if (reply.costUsd) out.costUsd += *reply.costUsd;
        else out.costComplete = false;
        const Json& r = reply.result;
        if (!reply.ok || !r.is_object() || !r.contains("program") || !r["program"].is_string() ||
            !r.contains("refused") || !r["refused"].is_boolean()) {
            out.failure = reply.ok ? "the model's answer is not a proposal ({\"program\", \"explanation\", \"refused\"})"
                                   : reply.message;
            return out;
        }
        AskRound done;
        done.round = round;
        done.refused = r["refused"].get<bool>();
        done.explanation = r.contains("explanation") && r["explanation"].is_string()
                               ? r["explanation"].get<std::string>()
                               : std::string();
        if (done.refused) {
            out.refused = true;
            out.rounds.push_back(std::move(done));
            return out;  // the original stays as it is
        }
        out.proposed = r["program"].get<std::string>();
        out.checked = checkSources(request.programPath, out.proposed, sources, request.checkOptions);
        std::vector<Diagnostic> errors;
        for (const Diagnostic& d : out.checked->diags.items())
            if (d.severity() == Severity::Error) errors.push_back(d);
        for (const Diagnostic& d : errors)
            done.errors.push_back(renderText(d, out.checked->sourceFor(d.file)));
        if (out.checked->ioError) done.errors.push_back(out.checked->ioError->message);
        out.rounds.push_back(done);
        if (done.errors.empty()) return out;
        std::string rendered;
        for (const std::string& e : done.errors) rendered += e + "\n";
        prompt += fmt::format(
            "\n\nYour previous proposal:\n<program>\n{}\n</program>\nThe checker rejected it:\n{}Fix the errors and "
            "return the complete program again.",
            out.proposed, rendered);
    }
    return out;
}

std::string unifiedDiff(std::string_view before, std::string_view after, const std::string& path) {
    std::vector<std::string> a = splitLines(before), b = splitLines(after);
    if (a == b) return {};
    // The longest common subsequence of lines, by dynamic programming: programs are small (the
    // front end's limits bound them), and the result is the minimal diff.
    const size_t n = a.size(), m = b.size();
    std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;) at(i, j) = a[i] == b[j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    // The edit script: ' ' kept, '-' removed, '+' added, with each line's index in a or b.
    struct Edit {
        char op;
        size_t i, j;
    };
    std::vector<Edit> edits;
    size_t i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) edits.push_back({' ', i++, j++});
        else if (j < m && (i == n || at(i, j + 1) >= at(i + 1, j))) edits.push_back({'+', i, j++});
        else edits.push_back({'-', i++, j});
    }
    std::string out = fmt::format("--- a/{}\n+++ b/{}\n", path, path);
    constexpr size_t kContext = 3;
    size_t k = 0;
    while (k < edits.size()) {
        // The next change, and the hunk around it: changes closer than 2 × context share one.
        size_t first = k;
        while (first < edits.size() && edits[first].op == ' ') ++first;
        if (first == edits.size()) break;
        size_t begin = first >= kContext ? first - kContext : 0;
        size_t end = first;
        for (size_t unchanged = 0; end < edits.size(); ++end) {
            unchanged = edits[end].op == ' ' ? unchanged + 1 : 0;
            if (unchanged > 2 * kContext) break;
        }
        // Trim the context after the last change to kContext lines.
        size_t last = end;
        while (last > begin && edits[last - 1].op == ' ') --last;
        end = std::min(edits.size(), last + kContext);
        size_t aStart = edits[begin].i, bStart = edits[begin].j, aLen = 0, bLen = 0;
        std::string body;
        for (size_t e = begin; e < end; ++e) {
            const Edit& edit = edits[e];
            const std::string& line = edit.op == '+' ? b[edit.j] : a[edit.i];
            if (edit.op != '+') ++aLen;
            if (edit.op != '-') ++bLen;
            body += edit.op;
            body += line;
            if (!line.ends_with('\n')) body += "\n\\ No newline at end of file\n";
        }
        out += fmt::format("@@ -{} +{} @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen));
        out += body;
        k = end;
    }
    return out;
}

}  // namespace remit
