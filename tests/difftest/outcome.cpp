// See outcome.h.
#include "tests/difftest/outcome.h"

#include <fmt/format.h>

namespace remit::difftest {

using json = nlohmann::json;

json normaliseTraceEvent(const json& e) {
    const std::string kind = e.value("event", "");
    auto pick = [&](std::initializer_list<const char*> keys) {
        json out = json::object();
        out["event"] = kind;
        for (const char* k : keys) out[k] = e.contains(k) ? e.at(k) : json(nullptr);
        return out;
    };
    if (kind == "call") {
        json out = pick({"resource", "site", "attempt", "args", "arg_tags", "pc_tags", "derived_from", "status"});
        const json& approval = e.contains("approval") ? e.at("approval") : json(nullptr);
        out["approval"] = approval.is_object() ? json{{"reasons", approval.value("reasons", json::array())}} : json(nullptr);
        if (out["status"] == "ok") {
            out["result"] = e.value("result", json(nullptr));
            out["result_tags"] = e.value("result_tags", json(nullptr));
        } else {
            out["error"] = e.contains("error") && e.at("error").is_object() ? e.at("error").value("code", json(nullptr))
                                                                            : json(nullptr);
        }
        return out;
    }
    if (kind == "violation") return pick({"resource", "site", "param", "tags", "via"});
    if (kind == "approval_granted") return pick({"resource", "site"});
    if (kind == "pending_approval") return pick({"resource", "site", "reasons"});
    if (kind == "invalid_output") return pick({"resource", "site"});
    if (kind == "fallback") return pick({"site"});
    return nullptr;
}

std::string describe(const Outcome& o) {
    switch (o.status) {
        case Outcome::Status::Completed: return "completed with " + o.value.dump();
        case Outcome::Status::Failed:
            return fmt::format("failed with {} at {}:{}-{}:{}{}", o.code, o.line, o.col, o.endLine, o.endCol,
                               o.message.empty() ? "" : " (" + o.message + ")");
        case Outcome::Status::Limit: return "hit a run limit";
    }
    return "?";
}

std::vector<std::string> compareOutcomes(const Outcome& vm, const Outcome& ref) {
    std::vector<std::string> out;
    size_t n = std::max(vm.events.size(), ref.events.size());
    for (size_t i = 0; i < n; ++i) {
        std::string a = i < vm.events.size() ? vm.events[i].dump() : "(none)";
        std::string b = i < ref.events.size() ? ref.events[i].dump() : "(none)";
        if (a != b) {
            out.push_back(fmt::format("event {}:\n    vm:        {}\n    reference: {}", i + 1, a, b));
            break;  // later events follow from the first difference
        }
    }
    bool same = vm.status == ref.status;
    if (same && vm.status == Outcome::Status::Completed) same = vm.value.dump() == ref.value.dump();
    if (same && vm.status == Outcome::Status::Failed)
        same = vm.code == ref.code && vm.line == ref.line && vm.col == ref.col && vm.endLine == ref.endLine &&
               vm.endCol == ref.endCol;
    if (!same) out.push_back(fmt::format("outcome:\n    vm:        {}\n    reference: {}", describe(vm), describe(ref)));
    return out;
}

}  // namespace remit::difftest
