// The manifest's four faces (compiler/manifest.h): its JSON (written and read back), the summary
// `remitc check` prints, the static policy comparison (E0501–E0503) and the authority diff behind
// `remitc diff`. The wording and number formats are the prototype's, since users and agents are
// taught with them; docs/manifest.md describes all four.
#include "compiler/manifest.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "runtime/numfmt.h"
#include "runtime/policy.h"

namespace remit {

namespace {

// The prototype's fixed sentence: Remit has no ambient authority, and the manifest says so.
constexpr const char* kAmbientEffects =
    "none: time, randomness, network and files are reachable only through declared capabilities";

// The prototype compares costs with this slack so that float noise (0.1 + 0.2) never reports a
// budget overrun or a cost change that is not there.
constexpr double kCostEpsilon = 1e-12;

// Python's str.format pads by characters, not bytes; names may hold non-ASCII text (tags, sinks).
size_t codePoints(std::string_view text) {
    size_t count = 0;
    for (char c : text) {
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
    }
    return count;
}

std::string padRight(std::string_view text, size_t width) {
    std::string out(text);
    size_t n = codePoints(text);
    if (n < width) out.append(width - n, ' ');
    return out;
}

std::string padLeft(std::string_view text, size_t width) {
    size_t n = codePoints(text);
    std::string out = n < width ? std::string(width - n, ' ') : std::string();
    out += text;
    return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i != 0) out += separator;
        out += items[i];
    }
    return out;
}

// Resources in name order whatever order the caller filled them in: JSON object keys, the summary,
// the policy check and the diff all rely on one stable order.
std::vector<const ResourceUse*> sortedResources(const Manifest& manifest) {
    std::vector<const ResourceUse*> out;
    out.reserve(manifest.resources.size());
    for (const ResourceUse& r : manifest.resources) out.push_back(&r);
    std::stable_sort(out.begin(), out.end(),
                     [](const ResourceUse* a, const ResourceUse* b) { return a->name < b->name; });
    return out;
}

Json stringArray(const std::vector<std::string>& items) {
    Json out = Json::array();
    for (const std::string& item : items) out.push_back(item);
    return out;
}

template <class T>
Json optionalJson(const std::optional<T>& value) {
    if (!value) return nullptr;
    return *value;
}

Json callSiteJson(const CallSiteInfo& site, bool modelCall) {
    Json j;
    j["site"] = site.site;
    j["line"] = site.line;
    j["col"] = site.col;
    j["resource"] = site.resource;
    // As in the prototype, every model call carries "agent" (null for a direct `llm.ask`), and a
    // capability call has no such key.
    if (site.agent || modelCall) j["agent"] = optionalJson(site.agent);
    // Ours: the type a model call asks for, as written (its JSON Schema: `remitc schema`).
    if (site.outputType) j["output_type"] = *site.outputType;
    j["approval"] = approvalText(site.approval);
    j["reasons"] = stringArray(site.reasons);
    j["retry"] = site.retry;
    j["timeout_s"] = optionalJson(site.timeoutSeconds);
    j["fallback"] = site.fallback;
    j["max_calls"] = site.maxCalls;
    return j;
}

// ---------------------------------------------------------------------------------------------
// Reading. Every helper reports failure by returning false, and the caller gives up on the whole
// document: a manifest that is partly wrong is not one to trust. Templates, so that json and
// ordered_json documents share one reader.

template <class Json>
const Json* member(const Json& object, const char* key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

template <class Json>
bool readString(const Json& object, const char* key, std::string& out) {
    const Json* v = member(object, key);
    if (v == nullptr || !v->is_string()) return false;
    out = v->template get<std::string>();
    return true;
}

template <class Json>
bool readBool(const Json& object, const char* key, bool& out) {
    const Json* v = member(object, key);
    if (v == nullptr || !v->is_boolean()) return false;
    out = v->template get<bool>();
    return true;
}

// A JSON integer may be stored signed or unsigned depending on how the document was built.
template <class Json>
bool asUnsigned(const Json& v, uint64_t& out) {
    if (v.is_number_unsigned()) {
        out = v.template get<uint64_t>();
        return true;
    }
    if (v.is_number_integer()) {
        int64_t s = v.template get<int64_t>();
        if (s < 0) return false;
        out = static_cast<uint64_t>(s);
        return true;
    }
    return false;
}

template <class Json>
bool asSigned(const Json& v, int64_t& out) {
    if (v.is_number_unsigned()) {
        uint64_t u = v.template get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        out = static_cast<int64_t>(u);
        return true;
    }
    if (v.is_number_integer()) {
        out = v.template get<int64_t>();
        return true;
    }
    return false;
}

template <class Json>
bool asNumber(const Json& v, double& out) {
    if (!v.is_number()) return false;
    out = v.template get<double>();
    return std::isfinite(out);
}

template <class Json>
bool readUnsigned(const Json& object, const char* key, uint64_t& out) {
    const Json* v = member(object, key);
    return v != nullptr && asUnsigned(*v, out);
}

template <class Json>
bool readPosition(const Json& object, const char* key, uint32_t& out) {
    uint64_t value = 0;
    if (!readUnsigned(object, key, value) || value > std::numeric_limits<uint32_t>::max()) return false;
    out = static_cast<uint32_t>(value);
    return true;
}

template <class Json>
bool readSigned(const Json& object, const char* key, int64_t& out) {
    const Json* v = member(object, key);
    return v != nullptr && asSigned(*v, out);
}

template <class Json>
bool readNumber(const Json& object, const char* key, double& out) {
    const Json* v = member(object, key);
    return v != nullptr && asNumber(*v, out);
}

// A member that must be present, either null or a number.
template <class Json>
bool readOptionalNumber(const Json& object, const char* key, std::optional<double>& out) {
    const Json* v = member(object, key);
    if (v == nullptr) return false;
    if (v->is_null()) {
        out.reset();
        return true;
    }
    double value = 0;
    if (!asNumber(*v, value)) return false;
    out = value;
    return true;
}

template <class Json>
bool asStringList(const Json& v, std::vector<std::string>& out) {
    if (!v.is_array()) return false;
    out.clear();
    for (const Json& item : v) {
        if (!item.is_string()) return false;
        out.push_back(item.template get<std::string>());
    }
    return true;
}

template <class Json>
bool readStringList(const Json& object, const char* key, std::vector<std::string>& out) {
    const Json* v = member(object, key);
    return v != nullptr && asStringList(*v, out);
}

std::optional<Approval> parseApproval(std::string_view text) {
    if (text == "none") return Approval::None;
    if (text == "possible") return Approval::Possible;
    if (text == "always") return Approval::Always;
    return std::nullopt;
}

bool isVerdict(std::string_view text) { return text == "allowed" || text == "denied" || text == "requires approval"; }

template <class Json>
bool readResource(const std::string& name, const Json& j, ResourceUse& out) {
    if (!j.is_object()) return false;
    out.name = name;
    std::string kind;
    if (!readString(j, "kind", kind)) return false;
    if (kind != "capability" && kind != "model") return false;
    out.isModel = kind == "model";
    if (!readUnsigned(j, "max_calls", out.maxCalls) || !readNumber(j, "cost_per_call", out.costPerCall) ||
        !readNumber(j, "worst_case_cost", out.worstCaseCost)) {
        return false;
    }
    if (out.isModel) return true;
    return readBool(j, "idempotent", out.idempotent) && readBool(j, "approval_always", out.approvalAlways) &&
           readStringList(j, "output_tags", out.outputTags) && readStringList(j, "clears", out.clears);
}

template <class Json>
bool readAgent(const std::string& name, const Json& j, AgentUse& out) {
    if (!j.is_object()) return false;
    out.name = name;
    if (!readString(j, "model", out.model) || !readUnsigned(j, "max_calls_worst_case", out.maxCallsWorstCase)) {
        return false;
    }
    const Json* declared = member(j, "max_calls_declared");
    if (declared == nullptr) return false;
    if (declared->is_null()) {
        out.maxCallsDeclared.reset();
        return true;
    }
    int64_t value = 0;
    if (!asSigned(*declared, value)) return false;
    out.maxCallsDeclared = value;
    return true;
}

template <class Json>
bool readCallSite(const Json& j, CallSiteInfo& out) {
    if (!j.is_object()) return false;
    std::string approval;
    if (!readString(j, "site", out.site) || !readPosition(j, "line", out.line) || !readPosition(j, "col", out.col) ||
        !readString(j, "resource", out.resource) || !readString(j, "approval", approval) ||
        !readStringList(j, "reasons", out.reasons) || !readSigned(j, "retry", out.retry) ||
        !readOptionalNumber(j, "timeout_s", out.timeoutSeconds) || !readBool(j, "fallback", out.fallback)) {
        return false;
    }
    std::optional<Approval> parsed = parseApproval(approval);
    if (!parsed) return false;
    out.approval = *parsed;
    // Absent from manifests written before sites counted their calls.
    out.maxCalls = 0;
    if (member(j, "max_calls") && !readUnsigned(j, "max_calls", out.maxCalls)) return false;
    // "agent" is absent on capability calls and null on direct model calls.
    out.agent.reset();
    if (const Json* agent = member(j, "agent"); agent != nullptr && !agent->is_null()) {
        if (!agent->is_string()) return false;
        out.agent = agent->template get<std::string>();
    }
    out.outputType.reset();
    if (const Json* type = member(j, "output_type"); type != nullptr) {
        if (!type->is_string()) return false;
        out.outputType = type->template get<std::string>();
    }
    return true;
}

template <class Json>
bool readFlow(const Json& j, Flow& out) {
    if (!j.is_object()) return false;
    if (!readString(j, "sink", out.sink) || !readStringList(j, "tags", out.tags) ||
        !readString(j, "verdict", out.verdict) || !isVerdict(out.verdict)) {
        return false;
    }
    const Json* sites = member(j, "sites");
    if (sites == nullptr || !sites->is_array()) return false;
    out.sites.clear();
    for (const Json& s : *sites) {
        if (!s.is_object()) return false;
        FlowSite site;
        if (!readString(s, "site", site.site) || !readString(s, "via", site.via)) return false;
        if (site.via != "data" && site.via != "control") return false;
        out.sites.push_back(std::move(site));
    }
    return true;
}

template <class Json>
std::optional<Manifest> readManifest(const Json& j) {
    if (!j.is_object()) return std::nullopt;
    Manifest m;
    std::string ambient;
    if (!readString(j, "program", m.program) || !readString(j, "program_hash", m.programHash) ||
        !readString(j, "host_hash", m.hostHash) || !readStringList(j, "uses", m.uses) ||
        !readNumber(j, "worst_case_cost_usd", m.worstCaseCostUsd) ||
        !readOptionalNumber(j, "budget_usd", m.budgetUsd) || !readString(j, "ambient_effects", ambient)) {
        return std::nullopt;
    }

    const Json* resources = member(j, "resources");
    if (resources == nullptr || !resources->is_object()) return std::nullopt;
    for (auto it = resources->begin(); it != resources->end(); ++it) {
        ResourceUse r;
        if (!readResource(it.key(), it.value(), r)) return std::nullopt;
        m.resources.push_back(std::move(r));
    }
    // manifest.h promises name order; an ordered_json document might not be in it.
    std::stable_sort(m.resources.begin(), m.resources.end(),
                     [](const ResourceUse& a, const ResourceUse& b) { return a.name < b.name; });

    const Json* agents = member(j, "agents");
    if (agents == nullptr || !agents->is_object()) return std::nullopt;
    for (auto it = agents->begin(); it != agents->end(); ++it) {
        AgentUse a;
        if (!readAgent(it.key(), it.value(), a)) return std::nullopt;
        m.agents.push_back(std::move(a));
    }

    const Json* sites = member(j, "call_sites");
    if (sites == nullptr || !sites->is_array()) return std::nullopt;
    for (const Json& s : *sites) {
        CallSiteInfo site;
        if (!readCallSite(s, site)) return std::nullopt;
        m.callSites.push_back(std::move(site));
    }
    const Json* approvalSites = member(j, "approval_sites");
    if (approvalSites == nullptr || !approvalSites->is_array()) return std::nullopt;

    const Json* flows = member(j, "flows");
    if (flows == nullptr || !flows->is_array()) return std::nullopt;
    for (const Json& f : *flows) {
        Flow flow;
        if (!readFlow(f, flow)) return std::nullopt;
        m.flows.push_back(std::move(flow));
    }

    const Json* inputs = member(j, "inputs");
    if (inputs == nullptr || !inputs->is_object()) return std::nullopt;
    for (auto it = inputs->begin(); it != inputs->end(); ++it) {
        std::vector<std::string> tags;
        if (!asStringList(it.value(), tags)) return std::nullopt;
        m.inputs.emplace_back(it.key(), std::move(tags));
    }
    if (const Json* strict = member(j, "strict_flows")) {
        if (!strict->is_boolean()) return std::nullopt;
        m.strictFlows = strict->template get<bool>();
    }
    return m;
}

template <class Json>
std::optional<Manifest> readManifestNoThrow(const Json& json) {
    try {
        return readManifest(json);
    } catch (const nlohmann::json::exception&) {
        // The readers check types before every get(), so this is a second line of defence only.
        return std::nullopt;
    }
}

// ---------------------------------------------------------------------------------------------
// The diff.

// How much a flow's verdict lets through without a person deciding: used only when a sink's tags
// are unchanged, so a change of verdict can only come from a different host interface.
int verdictLeniency(std::string_view verdict) {
    if (verdict == "allowed") return 2;
    if (verdict == "requires approval") return 1;
    return 0;
}

// Python's str() of the prototype's budget value: repr of a float, or None.
std::string budgetText(const std::optional<double>& budget) {
    return budget ? formatFloatRepr(*budget) : std::string("None");
}

size_t approvalSiteCount(const Manifest& manifest) {
    return static_cast<size_t>(std::count_if(manifest.callSites.begin(), manifest.callSites.end(),
                                             [](const CallSiteInfo& s) { return s.approval != Approval::None; }));
}

std::vector<std::string> setDifference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::set<std::string> left(a.begin(), a.end());
    std::set<std::string> right(b.begin(), b.end());
    std::vector<std::string> out;
    std::set_difference(left.begin(), left.end(), right.begin(), right.end(), std::back_inserter(out));
    return out;
}

class DiffWriter {
public:
    void widen(std::string change) { add(std::move(change), true); }
    void narrow(std::string change) { add(std::move(change), false); }
    AuthorityDiff take() { return std::move(diff_); }

private:
    void add(std::string change, bool widening) {
        diff_.changes.push_back(std::move(change));
        diff_.widening.push_back(widening);
        diff_.widened = diff_.widened || widening;
    }
    AuthorityDiff diff_;
};

void diffResources(const Manifest& before, const Manifest& after, DiffWriter& out) {
    std::set<std::string> names;
    for (const ResourceUse& r : before.resources) names.insert(r.name);
    for (const ResourceUse& r : after.resources) names.insert(r.name);
    for (const std::string& name : names) {
        const ResourceUse* o = before.resource(name);
        const ResourceUse* n = after.resource(name);
        uint64_t oldCalls = o ? o->maxCalls : 0;
        uint64_t newCalls = n ? n->maxCalls : 0;
        // As in the prototype, a resource that was declared but never called counts as new once
        // it is called.
        if (oldCalls == 0 && newCalls > 0) {
            out.widen(fmt::format("NEW resource '{}' (≤ {} call(s))", name, newCalls));
        } else if (oldCalls > 0 && n == nullptr) {
            out.narrow(fmt::format("REMOVED resource '{}' (was ≤ {} call(s))", name, oldCalls));
        } else if (newCalls > oldCalls) {
            out.widen(fmt::format("'{}' worst-case calls {} -> {}", name, oldCalls, newCalls));
        } else if (newCalls < oldCalls) {
            out.narrow(fmt::format("'{}' worst-case calls {} -> {}", name, oldCalls, newCalls));
        }
    }
}

// A `uses` entry asks the operator for a grant (E0501 names unused entries too), so a new one
// widens even before it is called. Entries whose calls were reported above are not repeated.
void diffUses(const Manifest& before, const Manifest& after, DiffWriter& out) {
    auto calls = [](const Manifest& m, const std::string& name) -> uint64_t {
        const ResourceUse* r = m.resource(name);
        return r ? r->maxCalls : 0;
    };
    std::set<std::string> oldUses(before.uses.begin(), before.uses.end());
    std::set<std::string> newUses(after.uses.begin(), after.uses.end());
    std::set<std::string> seen;
    for (const std::string& u : after.uses) {
        if (oldUses.count(u) != 0 || !seen.insert(u).second) continue;
        if (calls(after, u) == 0) out.widen(fmt::format("NEW uses entry '{}' (not called)", u));
    }
    seen.clear();
    for (const std::string& u : before.uses) {
        if (newUses.count(u) != 0 || !seen.insert(u).second) continue;
        if (calls(before, u) == 0) out.narrow(fmt::format("REMOVED uses entry '{}'", u));
    }
}

void diffCost(const Manifest& before, const Manifest& after, DiffWriter& out) {
    std::string line =
        fmt::format("worst-case cost ${} -> ${}", formatUsd(before.worstCaseCostUsd), formatUsd(after.worstCaseCostUsd));
    if (after.worstCaseCostUsd > before.worstCaseCostUsd + kCostEpsilon) {
        out.widen(std::move(line));
    } else if (after.worstCaseCostUsd < before.worstCaseCostUsd - kCostEpsilon) {
        out.narrow(std::move(line));
    }
}

// The prototype's rule, kept for compatibility: a higher budget or a dropped one widens, and so
// does adding a budget where there was none (it compares `budget or 0`). Erring toward reporting
// is the safe direction for a review gate.
void diffBudget(const Manifest& before, const Manifest& after, DiffWriter& out) {
    double oldValue = before.budgetUsd.value_or(0);
    double newValue = after.budgetUsd.value_or(0);
    std::string line = fmt::format("budget {} -> {}", budgetText(before.budgetUsd), budgetText(after.budgetUsd));
    if (newValue > oldValue || (before.budgetUsd && !after.budgetUsd)) {
        out.widen(std::move(line));
    } else if (before.budgetUsd != after.budgetUsd) {
        out.narrow(std::move(line));
    }
}

void diffFlows(const Manifest& before, const Manifest& after, DiffWriter& out) {
    std::map<std::string, const Flow*> oldFlows;
    std::map<std::string, const Flow*> newFlows;
    for (const Flow& f : before.flows) oldFlows.emplace(f.sink, &f);
    for (const Flow& f : after.flows) newFlows.emplace(f.sink, &f);
    std::set<std::string> sinks;
    for (const auto& [sink, flow] : oldFlows) sinks.insert(sink);
    for (const auto& [sink, flow] : newFlows) sinks.insert(sink);

    static const std::vector<std::string> kNone;
    for (const std::string& sink : sinks) {
        auto o = oldFlows.find(sink);
        auto n = newFlows.find(sink);
        const std::vector<std::string>& oldTags = o == oldFlows.end() ? kNone : o->second->tags;
        const std::vector<std::string>& newTags = n == newFlows.end() ? kNone : n->second->tags;
        std::vector<std::string> added = setDifference(newTags, oldTags);
        std::vector<std::string> removed = setDifference(oldTags, newTags);
        if (!added.empty()) {
            // Tags that reach the sink only because a call sits under a decision on them (every
            // site of the flow is `control`) are named as such: the fix is another one.
            const std::vector<FlowSite>& sites = n->second->sites;
            bool onlyControl = !sites.empty() && std::all_of(sites.begin(), sites.end(),
                                                              [](const FlowSite& s) { return s.via == "control"; });
            out.widen(fmt::format("flow into {} now receives {}{} ({})", sink, join(added, ", "),
                                  onlyControl ? " via control flow" : "", n->second->verdict));
        }
        if (!removed.empty()) {
            out.narrow(fmt::format("flow into {} no longer receives {}", sink, join(removed, ", ")));
        }
        // With the same tags the verdict moves only when the host's deny/approve rules changed
        // (the two programs were checked against different host interfaces); a more lenient
        // verdict then lets the same data through with less oversight. When the tags changed,
        // the lines above already explain the verdict.
        if (added.empty() && removed.empty() && o != oldFlows.end() && n != newFlows.end() &&
            o->second->verdict != n->second->verdict) {
            std::string line =
                fmt::format("flow into {} verdict {} -> {}", sink, o->second->verdict, n->second->verdict);
            if (verdictLeniency(n->second->verdict) > verdictLeniency(o->second->verdict)) {
                out.widen(std::move(line));
            } else {
                out.narrow(std::move(line));
            }
        }
    }
}

// The prototype counts approval sites: more of them means more calls that can touch sensitive
// data, so the count growing is reported as widening even though each such call still stops for
// a person. Site ids shift with every edit, so sites are not matched one by one.
void diffApprovalSites(const Manifest& before, const Manifest& after, DiffWriter& out) {
    size_t oldCount = approvalSiteCount(before);
    size_t newCount = approvalSiteCount(after);
    std::string line = fmt::format("approval sites {} -> {}", oldCount, newCount);
    if (newCount > oldCount) {
        out.widen(std::move(line));
    } else if (newCount < oldCount) {
        out.narrow(std::move(line));
    }
}

}  // namespace

const ResourceUse* Manifest::resource(std::string_view name) const {
    for (const ResourceUse& r : resources) {
        if (r.name == name) return &r;
    }
    return nullptr;
}

const char* approvalText(Approval approval) {
    switch (approval) {
        case Approval::None:
            return "none";
        case Approval::Possible:
            return "possible";
        case Approval::Always:
            return "always";
    }
    return "none";
}

Json manifestToJson(const Manifest& manifest) {
    Json j;
    j["program"] = manifest.program;
    j["program_hash"] = manifest.programHash;
    j["host_hash"] = manifest.hostHash;
    j["uses"] = stringArray(manifest.uses);

    Json resources = Json::object();
    for (const ResourceUse* r : sortedResources(manifest)) {
        Json res;
        res["kind"] = r->isModel ? "model" : "capability";
        res["max_calls"] = r->maxCalls;
        res["cost_per_call"] = r->costPerCall;
        res["worst_case_cost"] = r->worstCaseCost;
        if (!r->isModel) {
            res["idempotent"] = r->idempotent;
            res["approval_always"] = r->approvalAlways;
            res["output_tags"] = stringArray(r->outputTags);
            res["clears"] = stringArray(r->clears);
        }
        resources[r->name] = std::move(res);
    }
    j["resources"] = std::move(resources);

    Json agents = Json::object();
    for (const AgentUse& a : manifest.agents) {
        Json agent;
        agent["model"] = a.model;
        agent["max_calls_declared"] = optionalJson(a.maxCallsDeclared);
        agent["max_calls_worst_case"] = a.maxCallsWorstCase;
        agents[a.name] = std::move(agent);
    }
    j["agents"] = std::move(agents);

    j["worst_case_cost_usd"] = manifest.worstCaseCostUsd;
    j["budget_usd"] = optionalJson(manifest.budgetUsd);

    Json sites = Json::array();
    Json approvalSites = Json::array();
    for (const CallSiteInfo& s : manifest.callSites) {
        const ResourceUse* r = manifest.resource(s.resource);
        Json site = callSiteJson(s, r != nullptr && r->isModel);
        if (s.approval != Approval::None) approvalSites.push_back(site);
        sites.push_back(std::move(site));
    }
    j["call_sites"] = std::move(sites);
    j["approval_sites"] = std::move(approvalSites);

    Json flows = Json::array();
    for (const Flow& f : manifest.flows) {
        Json flow;
        flow["sink"] = f.sink;
        flow["tags"] = stringArray(f.tags);
        flow["verdict"] = f.verdict;
        Json flowSites = Json::array();
        for (const FlowSite& s : f.sites) {
            Json site;
            site["site"] = s.site;
            site["via"] = s.via;
            flowSites.push_back(std::move(site));
        }
        flow["sites"] = std::move(flowSites);
        flows.push_back(std::move(flow));
    }
    j["flows"] = std::move(flows);

    Json inputs = Json::object();
    for (const auto& [name, tags] : manifest.inputs) inputs[name] = stringArray(tags);
    j["inputs"] = std::move(inputs);
    // Only in strict mode, so a default manifest keeps the prototype's shape.
    if (manifest.strictFlows) j["strict_flows"] = true;
    j["ambient_effects"] = kAmbientEffects;
    return j;
}

std::optional<Manifest> manifestFromJson(const nlohmann::json& json) { return readManifestNoThrow(json); }

std::optional<Manifest> manifestFromJson(const Json& json) { return readManifestNoThrow(json); }

std::string manifestSummary(const Manifest& manifest) {
    // Column widths and spacing are the prototype's, so scripts that read this text keep working.
    std::string out = fmt::format("program {}: worst-case cost ${}", manifest.program, formatUsd(manifest.worstCaseCostUsd));
    if (manifest.budgetUsd) out += fmt::format(" (budget ${})", formatUsd(*manifest.budgetUsd));
    out += '\n';
    for (const ResourceUse* r : sortedResources(manifest)) {
        out += fmt::format("  {} ≤ {} call(s)   ≤ ${}\n", padRight(r->name, 22),
                           padLeft(std::to_string(r->maxCalls), 3), formatUsd(r->worstCaseCost));
    }
    for (const AgentUse& a : manifest.agents) {
        // The prototype prints Python's None for an agent without max_calls.
        std::string declared = a.maxCallsDeclared ? std::to_string(*a.maxCallsDeclared) : std::string("None");
        out += fmt::format("  agent {} ≤ {} call(s)  (max_calls {})\n", padRight(a.name, 16),
                           padLeft(std::to_string(a.maxCallsWorstCase), 3), declared);
    }
    for (const CallSiteInfo& s : manifest.callSites) {
        if (s.approval == Approval::None) continue;
        out += fmt::format("  approval {} {} at line {}: {}\n", padRight(approvalText(s.approval), 8), s.resource,
                           s.line, join(s.reasons, "; "));
    }
    for (const Flow& f : manifest.flows) {
        out += fmt::format("  flow {} receives {}: {}\n", padRight(f.sink, 26), join(f.tags, ", "), f.verdict);
    }
    return out;
}

namespace {

// E0502 at the call site of `resource` that makes the most calls, with one note per site that
// makes any: `web.fetch at main#1 (line 5): 30 = 10 iterations × (retry 2 + 1)`. A manifest
// without per-site counts (an older .rbc) leaves the diagnostic at the program header.
void pointAtCallSites(const Manifest& manifest, const std::string& resource, Diagnostic& d) {
    std::vector<const CallSiteInfo*> sites;
    for (const CallSiteInfo& s : manifest.callSites)
        if (s.resource == resource && s.maxCalls > 0) sites.push_back(&s);
    if (sites.empty()) return;
    std::stable_sort(sites.begin(), sites.end(),
                     [](const CallSiteInfo* a, const CallSiteInfo* b) { return a->maxCalls > b->maxCalls; });
    // How the call is written: `web.fetch`, `llm.ask`, `Writer.ask`.
    const ResourceUse* use = manifest.resource(resource);
    auto callee = [&](const CallSiteInfo& s) {
        return s.agent ? *s.agent + ".ask" : use && use->isModel ? resource + ".ask" : resource;
    };
    const CallSiteInfo& top = *sites.front();
    d.span = Span{top.line, top.col, top.line, top.col + static_cast<uint32_t>(codePoints(callee(top)))};
    for (const CallSiteInfo* s : sites) {
        uint64_t attempts = 1 + static_cast<uint64_t>(std::max<int64_t>(0, s->retry));
        uint64_t reached = s->maxCalls / attempts;
        std::string breakdown = attempts == 1 ? fmt::format("{} = {} iteration{}", s->maxCalls, reached,
                                                            reached == 1 ? "" : "s")
                                              : fmt::format("{} = {} iteration{} × (retry {} + 1)", s->maxCalls,
                                                            reached, reached == 1 ? "" : "s", s->retry);
        d.notes.push_back(fmt::format("{} at {} (line {}): {}", callee(*s), s->site, s->line, breakdown));
    }
}

}  // namespace

void checkManifestAgainstPolicy(const Manifest& manifest, const Policy& policy, const std::string& programFile,
                                const Span& programSpan, DiagnosticList& diags) {
    auto report = [&](DiagCode code, std::string message, std::string hint, Json details) {
        Diagnostic d = makeDiagnostic(code, std::move(message), programFile, programSpan, std::move(hint));
        d.details = std::move(details);
        diags.add(std::move(d));
    };
    for (const ResourceUse* r : sortedResources(manifest)) {
        const Grant* grant = policy.grantFor(r->name);
        if (grant == nullptr) {
            report(DiagCode::E0501, fmt::format("policy {} does not grant '{}'", policy.file, r->name),
                   "the program cannot widen host policy; ask the operator or remove the use", {{"resource", r->name}});
            continue;
        }
        if (!grant->maxCalls) continue;
        int64_t allowed = *grant->maxCalls;
        bool exceeds = allowed < 0 || r->maxCalls > static_cast<uint64_t>(allowed);
        if (exceeds) {
            Diagnostic d = makeDiagnostic(
                DiagCode::E0502,
                fmt::format("program may call '{}' up to {} time(s), but policy allows {}", r->name, r->maxCalls,
                            allowed),
                programFile, programSpan, "lower loop limits or retries around this call");
            d.details = {{"resource", r->name}, {"limit", "max_calls"}, {"value", allowed}, {"worst_case", r->maxCalls}};
            pointAtCallSites(manifest, r->name, d);
            diags.add(std::move(d));
        }
    }
    if (policy.maxUsd && manifest.worstCaseCostUsd > *policy.maxUsd + kCostEpsilon) {
        report(DiagCode::E0503,
               fmt::format("worst-case cost ${} exceeds the policy budget ${}", formatUsd(manifest.worstCaseCostUsd),
                           formatUsd(*policy.maxUsd)),
               "", {{"limit", "max_usd"}, {"value", *policy.maxUsd}, {"worst_case", manifest.worstCaseCostUsd}});
    }
}

AuthorityDiff diffManifests(const Manifest& before, const Manifest& after) {
    DiffWriter out;
    diffResources(before, after, out);
    diffUses(before, after, out);
    diffCost(before, after, out);
    diffBudget(before, after, out);
    diffFlows(before, after, out);
    diffApprovalSites(before, after, out);
    return out.take();
}

Json authorityDiffJson(const AuthorityDiff& diff) {
    Json widened = Json::array(), narrowed = Json::array();
    for (size_t i = 0; i < diff.changes.size(); ++i) (diff.widening[i] ? widened : narrowed).push_back(diff.changes[i]);
    Json out = Json::object();
    out["widened"] = diff.widened;
    out["changes"] = std::move(widened);
    out["narrowed"] = std::move(narrowed);
    return out;
}

}  // namespace remit
