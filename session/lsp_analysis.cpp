#include "session/lsp_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "compiler/checker.h"
#include "compiler/parser.h"
#include "compiler/token.h"
#include "runtime/builtins.h"

namespace remit::lsp {

namespace fs = std::filesystem;
using namespace remit::ast;

// LSP 3.17 enumerations used below.
namespace kind {
constexpr int kSymbolModule = 2, kSymbolClass = 5, kSymbolEnum = 10, kSymbolInterface = 11, kSymbolFunction = 12,
              kSymbolVariable = 13, kSymbolObject = 19, kSymbolStruct = 23, kSymbolEvent = 24;
constexpr int kCompletionMethod = 2, kCompletionFunction = 3, kCompletionClass = 7,
              kCompletionInterface = 8, kCompletionModule = 9, kCompletionKeyword = 14, kCompletionStruct = 22;
constexpr int kSeverityError = 1, kSeverityWarning = 2;
constexpr int kTagUnnecessary = 1;
constexpr int kInsertSnippet = 2;
}  // namespace kind

DocumentKind documentKindOf(std::string_view pathOrUri) {
    return pathOrUri.size() >= 5 && pathOrUri.substr(pathOrUri.size() - 5) == ".rmti" ? DocumentKind::Host
                                                                                        : DocumentKind::Program;
}

const ast::HostInterface* Analysis::host() const {
    return outcome.host ? outcome.host.get() : separateHost.get();
}

const SourceFile* Analysis::hostSource() const {
    if (outcome.host) return outcome.hostPath ? outcome.sourceFor(*outcome.hostPath) : nullptr;
    return separateHostSource.get();
}

// ---------------------------------------------------------------- analysis

std::unique_ptr<Analysis> analyse(std::string file, const std::optional<std::string>& path, std::string text,
                                  const OpenText& openText, std::function<bool()> interrupted) {
    auto analysis = std::make_unique<Analysis>();
    Analysis& a = *analysis;
    a.file = file;
    a.kind = documentKindOf(path ? *path : file);
    CheckOptions options;  // as `remitc check` without flags: discovered host and policy, default limits
    options.recordFacts = true;
    options.interrupted = std::move(interrupted);
    CheckOutcome& out = a.outcome;
    if (a.kind == DocumentKind::Host) {
        // What a check reports about a host interface: its syntax, then its resolution.
        out.file = file;
        auto source = std::make_unique<SourceFile>(file, std::move(text));
        out.host = parseHost(*source, out.diags, options.limits);
        out.sources[file] = std::move(source);
        out.hostPath = file;
        if (out.host && !out.diags.hasErrors()) {
            HostModel model;
            resolveHost(*out.host, file, model, out.diags);
            if (!out.diags.hasErrors()) a.hostModel = std::move(model);
        }
        return analysis;
    }
    // The host interface and the policy are found as `remitc check` finds them, named by absolute
    // path so each maps back to one URI; an open buffer of either wins over the disk.
    std::optional<std::string> hostPath;
    if (path)
        if (std::optional<std::string> found = findHostInterface(*path)) {
            std::error_code ec;
            fs::path absolute = fs::absolute(*found, ec);
            hostPath = (ec ? fs::path(*found) : absolute).lexically_normal().string();
        }
    auto readText = [&](const std::string& name, std::string& contents) -> std::optional<IoError> {
        if (const std::string* open = openText(name)) {
            contents = *open;
            return std::nullopt;
        }
        return readSource(name, options.limits.maxSourceBytes, contents);
    };
    SourceProvider provider;
    provider.host = [&](std::optional<std::string>& name, std::string& contents) -> std::optional<IoError> {
        name = hostPath;
        return name ? readText(*name, contents) : std::nullopt;
    };
    provider.policy = [&](std::optional<std::string>& name, std::string& contents) -> std::optional<IoError> {
        name = path ? findPolicy(*path) : std::nullopt;
        return name ? readText(*name, contents) : std::nullopt;
    };
    out = checkSources(file, std::move(text), provider, options);
    a.interrupted = out.checked && out.checked->interrupted;
    if (!out.host && hostPath) {
        // The check stopped at the program's own errors; completion still wants the host's names.
        std::string hostText;
        if (!readText(*hostPath, hostText)) {
            a.separateHostSource = std::make_unique<SourceFile>(*hostPath, std::move(hostText));
            DiagnosticList ignored;
            a.separateHost = parseHost(*a.separateHostSource, ignored, options.limits);
        }
    }
    return analysis;
}

// ---------------------------------------------------------------- diagnostics

Json diagnosticJson(const Diagnostic& d, const Range& range) {
    // The message as `remitc check` prints it: notes, then the hint.
    std::string message = d.message;
    for (const std::string& note : d.notes) message += "\nnote: " + note;
    if (!d.hint.empty()) message += "\nhint: " + d.hint;
    Json j;
    j["range"] = {{"start", {{"line", range.start.line}, {"character", range.start.character}}},
                  {"end", {{"line", range.end.line}, {"character", range.end.character}}}};
    j["severity"] = d.isError() ? kind::kSeverityError : kind::kSeverityWarning;
    j["code"] = std::string(diagInfo(d.code).code);
    j["source"] = "remit";
    j["message"] = std::move(message);
    // Unused code (a function main never calls, an unused or repeated `uses` entry) is shown faded.
    if (d.code == DiagCode::W0101 || d.code == DiagCode::W0201 || d.code == DiagCode::W0202)
        j["tags"] = Json::array({kind::kTagUnnecessary});
    Json data = {{"message", d.message}, {"notes", d.notes}};
    if (!d.hint.empty()) data["hint"] = d.hint;
    if (!d.details.is_null()) data["details"] = d.details;
    j["data"] = std::move(data);
    return j;
}

namespace {

Json positionJson(const Position& p) { return {{"line", p.line}, {"character", p.character}}; }
Json rangeJson(const Range& r) { return {{"start", positionJson(r.start)}, {"end", positionJson(r.end)}}; }
Json locationJson(const std::string& uri, const Range& r) { return {{"uri", uri}, {"range", rangeJson(r)}}; }

// The text of a file the analysis read (the document itself, its host interface, its policy), for
// mapping that file's spans to positions.
class Texts {
public:
    explicit Texts(const Query& q) : q_(q) {}
    const DocumentText& of(const std::string& file) {
        if (file.empty() || file == q_.analysis.file) return q_.text;
        auto it = others_.find(file);
        if (it != others_.end()) return it->second;
        const SourceFile* source = q_.analysis.outcome.sourceFor(file);
        if (!source && q_.analysis.separateHostSource && q_.analysis.separateHostSource->name() == file)
            source = q_.analysis.separateHostSource.get();
        return others_.emplace(file, DocumentText(source ? source->text() : std::string())).first->second;
    }
    Range range(const std::string& file, const Span& span) { return of(file).rangeOf(span, q_.encoding); }
    std::string uri(const std::string& file) {
        return file.empty() || file == q_.analysis.file ? q_.selfUri : q_.uriOf(file);
    }

private:
    const Query& q_;
    std::map<std::string, DocumentText> others_;
};

std::string fileLeaf(const std::string& file) {
    std::string leaf = fs::path(file).filename().string();
    return leaf.empty() ? file : leaf;
}

}  // namespace

std::map<std::string, Json> diagnosticsByUri(const Query& q) {
    std::map<std::string, Json> out;
    Json& own = out[q.selfUri] = Json::array();
    const CheckOutcome& o = q.analysis.outcome;
    if (o.ioError)  // a host interface or policy that cannot be read at all (`remitc check` exits 2 for it)
        own.push_back({{"range", rangeJson(Range{})},
                       {"severity", kind::kSeverityError},
                       {"source", "remit"},
                       {"message", o.ioError->message}});
    Texts texts(q);
    Range header{};
    if (q.analysis.kind == DocumentKind::Program && o.program && o.program->span.valid())
        header = q.text.rangeOf(o.program->span, q.encoding);
    for (const Diagnostic& d : o.diags.items()) {
        if (d.file.empty() || d.file == q.analysis.file) {
            own.push_back(diagnosticJson(d, q.text.rangeOf(d.span, q.encoding)));
            continue;
        }
        Range range = texts.range(d.file, d.span);
        std::string uri = texts.uri(d.file);
        Json& there = out[uri];
        if (there.is_null()) there = Json::array();
        there.push_back(diagnosticJson(d, range));
        if (q.analysis.kind != DocumentKind::Program) continue;
        Json here = diagnosticJson(d, header);
        here["relatedInformation"] = Json::array(
            {{{"location", locationJson(uri, range)},
              {"message", fmt::format("{} is in {}", diagInfo(d.code).code, fileLeaf(d.file))}}});
        own.push_back(std::move(here));
    }
    return out;
}

// ---------------------------------------------------------------- what is under the cursor

namespace {

struct Point {
    uint32_t line = 0, col = 0;
};

bool contains(const Span& s, Point p) {
    if (!s.valid()) return false;
    uint32_t endLine = s.endLine ? s.endLine : s.line;
    uint32_t endCol = s.endLine ? s.endCol : s.col;
    bool afterStart = s.line < p.line || (s.line == p.line && s.col <= p.col);
    bool beforeEnd = p.line < endLine || (p.line == endLine && p.col <= endCol);  // the end too: a cursor after a word
    return afterStart && beforeEnd;
}

Span nameSpanAt(const Span& start, const std::string& name) {
    return Span{start.line, start.col, start.line, start.col + static_cast<uint32_t>(codePointCount(name))};
}

// The innermost of each kind of thing at a point of a parsed file. The walk enters a node only
// when the point is inside it, so it is one path down the tree.
struct Located {
    const Expr* expr = nullptr;          // the innermost expression
    const CallExpr* callee = nullptr;    // on a call's callee (`web.fetch`, `greet`, `Summarizer.ask`)
    const TypeExpr* type = nullptr;      // on a written type
    const Stmt* letName = nullptr;       // on the name a let or var declares
    const Decl* declName = nullptr;      // on a declaration's name
    const Param* param = nullptr;        // on a parameter's name
    const AgentDecl* agentModel = nullptr;  // on an agent's `model:` value
    const UseEntry* use = nullptr;       // on an entry of `uses`
};

class Locator {
public:
    explicit Locator(Point p) : p_(p) {}
    Located found;

    void program(const Program& prog) {
        for (const UseEntry& u : prog.uses)
            if (contains(u.span, p_)) found.use = &u;
        decls(prog.decls);
    }
    void host(const HostInterface& host) { decls(host.decls); }

private:
    Point p_;

    void decls(const std::vector<DeclPtr>& all) {
        for (const DeclPtr& d : all) {
            // A function's or test's span may end with its header; its body is a block of its own.
            const Block* body = d->kind == DeclKind::Fn     ? d->as<FnDecl>().body.get()
                                : d->kind == DeclKind::Test ? d->as<TestDecl>().body.get()
                                                            : nullptr;
            if (!contains(d->span, p_) && !(body && contains(body->span, p_))) continue;
            switch (d->kind) {
                case DeclKind::Type: {
                    const TypeDecl& t = d->as<TypeDecl>();
                    if (contains(t.nameSpan, p_)) found.declName = d.get();
                    type(*t.type);
                    break;
                }
                case DeclKind::Fn: {
                    const FnDecl& f = d->as<FnDecl>();
                    if (contains(f.nameSpan, p_)) found.declName = d.get();
                    params(f.params);
                    if (f.ret) type(*f.ret);
                    block(*f.body);
                    break;
                }
                case DeclKind::Agent: {
                    const AgentDecl& a = d->as<AgentDecl>();
                    if (contains(a.nameSpan, p_)) found.declName = d.get();
                    if (contains(a.modelSpan, p_)) found.agentModel = &a;
                    break;
                }
                case DeclKind::Test: block(*d->as<TestDecl>().body); break;
                case DeclKind::Capability: {
                    const CapabilityDecl& c = d->as<CapabilityDecl>();
                    if (contains(c.nameSpan, p_)) found.declName = d.get();
                    params(c.params);
                    if (c.ret) type(*c.ret);
                    break;
                }
                case DeclKind::Model:
                    if (contains(d->as<ModelDecl>().nameSpan, p_)) found.declName = d.get();
                    break;
                case DeclKind::Input:
                    if (contains(d->as<InputDecl>().nameSpan, p_)) found.declName = d.get();
                    break;
            }
        }
    }
    void params(const std::vector<Param>& ps) {
        for (const Param& p : ps) {
            if (contains(nameSpanAt(p.span, p.name), p_)) found.param = &p;
            if (p.type) type(*p.type);
        }
    }
    void type(const TypeExpr& t) {
        if (!contains(t.span, p_)) return;
        found.type = &t;
        for (const TypePtr& arg : t.args) type(*arg);
        for (const TypeField& f : t.fields) type(*f.type);
    }
    void block(const Block& b) {
        if (!contains(b.span, p_)) return;
        for (const StmtPtr& s : b.stmts) {
            if (!contains(s->span, p_)) continue;
            if (s->kind == StmtKind::Let && contains(s->nameSpan, p_)) found.letName = s.get();
            if (s->type) type(*s->type);
            if (s->value) expr(*s->value);
        }
    }
    void expr(const Expr& e) {
        if (!contains(e.span, p_)) return;
        found.expr = &e;
        if (e.kind == ExprKind::Call) {
            const auto& c = e.as<CallExpr>();
            if (contains(c.calleeSpan, p_)) found.callee = &c;
            if (c.askType) type(*c.askType);
        }
        forEachChild(e, [&](const Expr& child) { expr(child); }, [&](const Block& b) { block(b); });
    }
};

Located locate(const Query& q, Position position) {
    uint32_t line = 0, col = 0;
    q.text.spanPointOf(position, q.encoding, line, col);
    Locator locator(Point{line, col});
    const CheckOutcome& o = q.analysis.outcome;
    if (q.analysis.kind == DocumentKind::Program) {
        if (o.program) locator.program(*o.program);
    } else if (o.host) {
        locator.host(*o.host);
    }
    return locator.found;
}

// ---------------------------------------------------------------- names to declarations

const Decl* findDecl(const std::vector<DeclPtr>& decls, DeclKind kind, std::string_view name) {
    for (const DeclPtr& d : decls) {
        if (d->kind != kind) continue;
        std::string_view declared;
        switch (kind) {
            case DeclKind::Type: declared = d->as<TypeDecl>().name; break;
            case DeclKind::Fn: declared = d->as<FnDecl>().name; break;
            case DeclKind::Agent: declared = d->as<AgentDecl>().name; break;
            case DeclKind::Capability: declared = d->as<CapabilityDecl>().name; break;
            case DeclKind::Model: declared = d->as<ModelDecl>().name; break;
            case DeclKind::Input: declared = d->as<InputDecl>().name; break;
            case DeclKind::Test: break;
        }
        if (declared == name) return d.get();
    }
    return nullptr;
}

Span declNameSpan(const Decl& d) {
    switch (d.kind) {
        case DeclKind::Type: return d.as<TypeDecl>().nameSpan;
        case DeclKind::Fn: return d.as<FnDecl>().nameSpan;
        case DeclKind::Agent: return d.as<AgentDecl>().nameSpan;
        case DeclKind::Capability: return d.as<CapabilityDecl>().nameSpan;
        case DeclKind::Model: return d.as<ModelDecl>().nameSpan;
        case DeclKind::Input: return d.as<InputDecl>().nameSpan;
        case DeclKind::Test: break;
    }
    return d.span;
}

// A declaration and the file it is in.
struct Target {
    const Decl* decl = nullptr;
    std::string file;
};

const std::vector<DeclPtr>* programDecls(const Analysis& a) {
    if (a.kind == DocumentKind::Program) return a.outcome.program ? &a.outcome.program->decls : nullptr;
    return nullptr;
}

Target hostDecl(const Analysis& a, DeclKind kind, std::string_view name) {
    const HostInterface* host = a.host();
    const SourceFile* source = a.hostSource();
    if (!host) return {};
    const Decl* d = findDecl(host->decls, kind, name);
    return d ? Target{d, source ? source->name() : a.file} : Target{};
}

Target programDecl(const Analysis& a, DeclKind kind, std::string_view name) {
    const std::vector<DeclPtr>* decls = programDecls(a);
    const Decl* d = decls ? findDecl(*decls, kind, name) : nullptr;
    return d ? Target{d, a.file} : Target{};
}

// A resource named in `uses` or called: a host capability, else a host model.
Target resourceDecl(const Analysis& a, std::string_view name) {
    Target t = hostDecl(a, DeclKind::Capability, name);
    return t.decl ? t : hostDecl(a, DeclKind::Model, name);
}

// What a call calls, as the checker resolved it (by the callee's spelling when the checker did
// not get that far).
Target calleeDecl(const Analysis& a, const CallExpr& call) {
    const CheckResult* checked = a.outcome.checked ? &*a.outcome.checked : nullptr;
    if (checked) {
        auto it = checked->calls.find(static_cast<uint32_t>(call.id));
        if (it != checked->calls.end()) {
            const ResolvedCall& r = it->second;
            switch (r.target) {
                case CallTarget::Function: return programDecl(a, DeclKind::Fn, r.name);
                case CallTarget::Capability: return hostDecl(a, DeclKind::Capability, r.name);
                case CallTarget::Model: return hostDecl(a, DeclKind::Model, r.name);
                case CallTarget::Agent: return programDecl(a, DeclKind::Agent, r.name);
                case CallTarget::Builtin:
                case CallTarget::Unknown: return {};
            }
        }
    }
    if (call.callee.size() == 1) return programDecl(a, DeclKind::Fn, call.callee[0]);
    if (call.callee.size() == 2 && call.callee[1] == "ask") {
        Target agent = programDecl(a, DeclKind::Agent, call.callee[0]);
        return agent.decl ? agent : hostDecl(a, DeclKind::Model, call.callee[0]);
    }
    return hostDecl(a, DeclKind::Capability, call.calleeName());
}

Target typeDecl(const Analysis& a, std::string_view name) {
    Target t = programDecl(a, DeclKind::Type, name);
    return t.decl ? t : hostDecl(a, DeclKind::Type, name);
}

// ---------------------------------------------------------------- hover text

TypeRef typeOf(const Analysis& a, NodeId id) {
    if (!a.outcome.checked) return nullptr;
    auto index = static_cast<size_t>(id);
    const std::vector<TypeRef>& types = a.outcome.checked->exprTypes;
    return index < types.size() ? types[index] : nullptr;
}

// An alias with its definition: `Summary = {mood: Mood, line: Str}`.
std::string typeWithDefinition(TypeRef t) {
    std::string shown = showType(t);
    if (t->name.empty()) return shown;
    if (t->kind == remit::TypeKind::Record) {
        std::string fields;
        for (const RecordFieldType& f : t->fields)
            fields += fmt::format("{}{}: {}", fields.empty() ? "" : ", ", f.name, showType(f.type));
        return fmt::format("{} = {{{}}}", shown, fields);
    }
    if (t->kind == remit::TypeKind::Enum) {
        std::string options;
        for (const std::string& o : t->options) options += fmt::format("{}\"{}\"", options.empty() ? "" : " | ", o);
        return fmt::format("{} = {}", shown, options);
    }
    return shown;
}

std::string usd(double value) { return fmt::format("${:.4f}", value); }

// "web.fetch ≤ 6, llm ≤ 2 (agent Summarizer ≤ 2) · $0.0260", or "no host calls".
std::string callsText(const Analysis& a, const CallCounts& calls) {
    std::string resources, agents;
    for (const auto& [name, n] : calls) {
        if (n == 0 || name.rfind("site:", 0) == 0) continue;  // sites are shown on their calls
        if (name.rfind("agent:", 0) == 0)
            agents += fmt::format("{}agent {} ≤ {}", agents.empty() ? "" : ", ", name.substr(6), n);
        else resources += fmt::format("{}{} ≤ {}", resources.empty() ? "" : ", ", name, n);
    }
    if (resources.empty()) return "no host calls";
    std::string out = resources;
    if (!agents.empty()) out += " (" + agents + ")";
    if (a.outcome.checked) out += " · " + usd(worstCaseCostOf(a.outcome.checked->host, calls));
    return out;
}

std::string tagsText(const std::map<std::string, std::set<std::string>>& tags) {
    if (tags.empty()) return "none";
    std::string out;
    for (const auto& [tag, origins] : tags) {
        std::string from;
        for (const std::string& o : origins) from += (from.empty() ? "" : ", ") + o;
        out += fmt::format("{}`{}`", out.empty() ? "" : "; ", tag);
        if (!from.empty()) out += " from " + from;
    }
    return out;
}

// "a, b, c" (fmt::join).
std::string joined(const std::vector<std::string>& items, std::string_view separator = ", ") {
    return fmt::format("{}", fmt::join(items, separator));
}

std::string capabilityText(const Capability& c) {
    std::string params;
    for (const CapabilityParam& p : c.params) {
        params += fmt::format("{}{}: {}", params.empty() ? "" : ", ", p.name, showType(p.type));
        if (!p.deny.empty()) params += " deny " + joined(p.deny);
        if (!p.approve.empty()) params += " approve " + joined(p.approve);
    }
    std::string out = fmt::format("```remit\ncapability {}({}) -> {}\n```\n", c.name, params, showType(c.ret));
    std::vector<std::string> facts = {fmt::format("{} per call", usd(c.cost))};
    if (!c.tags.empty()) facts.push_back("result tagged " + joined(c.tags));
    if (!c.clears.empty()) facts.push_back("clears " + joined(c.clears));
    facts.push_back(c.idempotent ? "idempotent" : "not idempotent (no retry)");
    if (c.approvalAlways) facts.push_back("approval always");
    return out + "host capability · " + joined(facts, " · ");
}

std::string modelText(const ModelInfo& m) {
    return fmt::format("```remit\nmodel {}\n```\nhost model · {} per call", m.name, usd(m.cost));
}

// The resolved host of the analysis: the check's, or a host document's own.
const HostModel* hostModelOf(const Analysis& a) {
    if (a.outcome.checked) return &a.outcome.checked->host;
    return a.hostModel ? &*a.hostModel : nullptr;
}

std::string resourceText(const Analysis& a, std::string_view name) {
    const HostModel* host = hostModelOf(a);
    if (!host) return {};
    if (const Capability* c = host->capability(name)) return capabilityText(*c);
    if (const ModelInfo* m = host->model(name)) return modelText(*m);
    return {};
}

std::string fnSignature(const Analysis& a, const FnDecl& f) {
    std::string params;
    for (const Param& p : f.params) {
        TypeRef t = p.type ? typeOf(a, p.type->id) : nullptr;
        params += fmt::format("{}{}: {}", params.empty() ? "" : ", ", p.name, t ? showType(t) : "?");
    }
    std::string ret;
    if (f.ret) {
        TypeRef t = typeOf(a, f.ret->id);
        ret = " -> " + (t ? showType(t) : std::string("?"));
    }
    return fmt::format("fn {}({}){}", f.name, params, ret);
}

std::string fnText(const Analysis& a, const FnDecl& f) {
    std::string out = fmt::format("```remit\n{}\n```\n", fnSignature(a, f));
    if (!a.outcome.checked) return out;
    const auto& functions = a.outcome.checked->facts.functions;
    auto it = functions.find(f.name);
    if (it == functions.end()) return out + "not analysed (the program has errors before it)";
    return out + "one call, worst case: " + callsText(a, it->second.calls);
}

std::string agentText(const AgentDecl& agent) {
    std::string out = fmt::format("```remit\nagent {}\n```\nmodel {}", agent.name, agent.model);
    if (agent.maxCalls) out += fmt::format(" · max_calls {}", *agent.maxCalls);
    return out;
}

std::string builtinText(std::string_view name) {
    std::vector<std::string> arities;
    for (const BuiltinInfo& b : kBuiltins)
        if (b.name == name) arities.push_back(std::to_string(b.argc));
    return fmt::format("```remit\n{}\n```\nbuiltin · {} argument(s)", name, joined(arities, " or "));
}

// What the checker computed for an expression.
std::string exprFactsText(const Analysis& a, const Expr& e) {
    std::string out;
    TypeRef t = typeOf(a, e.id);
    out += fmt::format("**type** `{}`", t ? showType(t) : "?");
    const CheckFacts& facts = a.outcome.checked->facts;
    auto it = facts.exprs.find(static_cast<uint32_t>(e.id));
    if (it == facts.exprs.end()) return out + "\n\nnot analysed (unreachable, or after an error)";
    out += "\n\n**tags** " + tagsText(it->second.tags);
    out += "\n\n**calls (worst case)** " + callsText(a, it->second.calls);
    return out;
}

Json hoverJson(const std::string& markdown, const Range& range) {
    return {{"contents", {{"kind", "markdown"}, {"value", markdown}}}, {"range", rangeJson(range)}};
}

}  // namespace

Json hover(const Query& q, Position position) {
    const Analysis& a = q.analysis;
    // Blank space (an indentation, the gap between two statements) is in no word: it shows nothing
    // rather than the block around it. A cursor just after a word still hovers that word.
    {
        const std::string& text = q.text.text();
        size_t at = q.text.offsetOf(position, q.encoding);
        auto blank = [&](size_t i) { return i >= text.size() || std::isspace(static_cast<unsigned char>(text[i])); };
        if (blank(at) && (at == 0 || blank(at - 1))) return nullptr;
    }
    Located at = locate(q, position);
    auto range = [&](const Span& s) { return q.text.rangeOf(s, q.encoding); };
    if (at.declName) {
        const Decl& d = *at.declName;
        Span name = declNameSpan(d);
        switch (d.kind) {
            case DeclKind::Fn: return hoverJson(fnText(a, d.as<FnDecl>()), range(name));
            case DeclKind::Agent: return hoverJson(agentText(d.as<AgentDecl>()), range(name));
            case DeclKind::Capability:
            case DeclKind::Model: {
                std::string text = resourceText(a, d.kind == DeclKind::Model ? d.as<ModelDecl>().name
                                                                              : d.as<CapabilityDecl>().name);
                return text.empty() ? Json(nullptr) : hoverJson(text, range(name));
            }
            case DeclKind::Type: {
                const std::string& typeName = d.as<TypeDecl>().name;
                const HostModel* host = hostModelOf(a);
                TypeRef t = nullptr;
                if (a.outcome.checked) {
                    auto it = a.outcome.checked->programTypes.find(typeName);
                    if (it != a.outcome.checked->programTypes.end()) t = it->second;
                }
                if (!t && host)
                    if (auto it = host->types.find(typeName); it != host->types.end()) t = it->second;
                if (!t) return nullptr;
                return hoverJson(fmt::format("```remit\ntype {}\n```", typeWithDefinition(t)), range(name));
            }
            case DeclKind::Input: {
                const InputDecl& in = d.as<InputDecl>();
                return hoverJson(fmt::format("```remit\ninput {}\n```\n`main`'s parameter `{}` is tagged {}", in.name,
                                             in.name, joined(in.tags)),
                                 range(name));
            }
            case DeclKind::Test: return nullptr;
        }
    }
    if (at.use) {
        std::string text = resourceText(a, at.use->name);
        return text.empty() ? Json(nullptr) : hoverJson(text, range(at.use->span));
    }
    if (at.agentModel) {
        std::string text = resourceText(a, at.agentModel->model);
        return text.empty() ? Json(nullptr) : hoverJson(text, range(at.agentModel->modelSpan));
    }
    if (at.type) {
        // In a program the checker noted each written type; in a host interface, its own names.
        TypeRef t = a.kind == DocumentKind::Program ? typeOf(a, at.type->id) : nullptr;
        if (!t && a.kind == DocumentKind::Host && a.hostModel && at.type->kind == ast::TypeKind::Named)
            if (auto it = a.hostModel->types.find(at.type->name); it != a.hostModel->types.end()) t = it->second;
        if (!t) return nullptr;
        return hoverJson(fmt::format("```remit\n{}\n```", typeWithDefinition(t)), range(at.type->span));
    }
    if (!a.outcome.checked || a.kind != DocumentKind::Program) return nullptr;
    if (at.letName) {
        const Stmt& s = *at.letName;
        std::string text = fmt::format("```remit\n{} {}\n```\n", s.isVar ? "var" : "let", s.name);
        if (s.type) {
            TypeRef declared = typeOf(a, s.type->id);
            if (declared) text += fmt::format("declared `{}` · the value: ", showType(declared));
        }
        return hoverJson(text + exprFactsText(a, *s.value), range(s.nameSpan));
    }
    if (at.param) {
        TypeRef t = at.param->type ? typeOf(a, at.param->type->id) : nullptr;
        return hoverJson(fmt::format("```remit\n{}: {}\n```\nparameter", at.param->name, t ? showType(t) : "?"),
                         range(nameSpanAt(at.param->span, at.param->name)));
    }
    if (!at.expr) return nullptr;
    std::string head;
    if (at.callee) {
        const CallExpr& call = *at.callee;
        auto it = a.outcome.checked->calls.find(static_cast<uint32_t>(call.id));
        if (it != a.outcome.checked->calls.end()) {
            const ResolvedCall& r = it->second;
            switch (r.target) {
                case CallTarget::Capability:
                case CallTarget::Model: head = resourceText(a, r.name); break;
                case CallTarget::Function:
                    if (const FnDecl* f = a.outcome.program->findFn(r.name)) head = fnText(a, *f);
                    break;
                case CallTarget::Agent:
                    if (Target t = programDecl(a, DeclKind::Agent, r.name); t.decl)
                        head = agentText(t.decl->as<AgentDecl>());
                    break;
                case CallTarget::Builtin: head = builtinText(r.name); break;
                case CallTarget::Unknown: break;
            }
            if (!r.site.empty()) {
                // The site's worst case in a whole run: what main's analysis adds up for it.
                const auto& functions = a.outcome.checked->facts.functions;
                auto main = functions.find("main");
                auto total = main == functions.end() ? CallCounts::const_iterator() : main->second.calls.find("site:" + r.site);
                if (main != functions.end() && total != main->second.calls.end())
                    head += fmt::format("\n\ncall site `{}`: at most {} attempt(s) in a run", r.site, total->second);
                else head += fmt::format("\n\ncall site `{}`: not reached from main", r.site);
            }
        }
        if (!head.empty()) head += "\n\n---\n\n";
        head += "this call: ";
    }
    return hoverJson(head + exprFactsText(a, *at.expr), range(at.expr->span));
}

Json definition(const Query& q, Position position) {
    const Analysis& a = q.analysis;
    Located at = locate(q, position);
    Texts texts(q);
    auto location = [&](const Target& t) -> Json {
        if (!t.decl) return nullptr;
        return locationJson(texts.uri(t.file), texts.range(t.file, declNameSpan(*t.decl)));
    };
    if (at.declName) return locationJson(q.selfUri, q.text.rangeOf(declNameSpan(*at.declName), q.encoding));
    if (at.use) return location(resourceDecl(a, at.use->name));
    if (at.agentModel) return location(hostDecl(a, DeclKind::Model, at.agentModel->model));
    if (at.callee) return location(calleeDecl(a, *at.callee));
    if (at.type && at.type->kind == ast::TypeKind::Named) return location(typeDecl(a, at.type->name));
    if (at.expr && at.expr->kind == ExprKind::Name && a.outcome.checked) {
        const auto& defs = a.outcome.checked->facts.definitions;
        auto it = defs.find(static_cast<uint32_t>(at.expr->id));
        if (it != defs.end() && it->second.valid()) return locationJson(q.selfUri, q.text.rangeOf(it->second, q.encoding));
    }
    return nullptr;
}

// ---------------------------------------------------------------- symbols

Json documentSymbols(const Query& q) {
    const CheckOutcome& o = q.analysis.outcome;
    Json out = Json::array();
    auto range = [&](const Span& s) { return rangeJson(q.text.rangeOf(s, q.encoding)); };
    auto symbol = [&](const std::string& name, int symbolKind, const Span& whole, const Span& selection,
                      std::string detail) {
        Json j = {{"name", name.empty() ? std::string("?") : name},
                  {"kind", symbolKind},
                  {"range", range(whole)},
                  {"selectionRange", range(selection)}};
        if (!detail.empty()) j["detail"] = std::move(detail);
        return j;
    };
    const std::vector<DeclPtr>* decls = nullptr;
    if (q.analysis.kind == DocumentKind::Program && o.program) {
        if (o.program->span.valid())
            out.push_back(symbol(o.program->name, kind::kSymbolModule, o.program->span, o.program->span, "program"));
        decls = &o.program->decls;
    } else if (q.analysis.kind == DocumentKind::Host && o.host) {
        decls = &o.host->decls;
    }
    if (!decls) return out;
    for (const DeclPtr& d : *decls) {
        // A declaration's span may stop at its signature (a function's body is a block of its own).
        Span whole = d->span;
        if (d->kind == DeclKind::Fn) whole = Span::cover(d->span, d->as<FnDecl>().body->span);
        if (d->kind == DeclKind::Test) whole = Span::cover(d->span, d->as<TestDecl>().body->span);
        switch (d->kind) {
            case DeclKind::Type: {
                const TypeDecl& t = d->as<TypeDecl>();
                int k = t.type->kind == ast::TypeKind::Union ? kind::kSymbolEnum : kind::kSymbolStruct;
                out.push_back(symbol(t.name, k, whole, t.nameSpan, "type"));
                break;
            }
            case DeclKind::Fn: {
                const FnDecl& f = d->as<FnDecl>();
                Json s = symbol(f.name, kind::kSymbolFunction, whole, f.nameSpan, fnSignature(q.analysis, f));
                Json children = Json::array();
                for (const Param& p : f.params)
                    children.push_back(symbol(p.name, kind::kSymbolVariable, p.span, nameSpanAt(p.span, p.name), "parameter"));
                if (!children.empty()) s["children"] = std::move(children);
                out.push_back(std::move(s));
                break;
            }
            case DeclKind::Agent: {
                const AgentDecl& ag = d->as<AgentDecl>();
                out.push_back(symbol(ag.name, kind::kSymbolClass, whole, ag.nameSpan, "agent on " + ag.model));
                break;
            }
            case DeclKind::Test: {
                const TestDecl& t = d->as<TestDecl>();
                out.push_back(symbol("test \"" + t.name + "\"", kind::kSymbolEvent, whole, d->span, ""));
                break;
            }
            case DeclKind::Capability: {
                const CapabilityDecl& c = d->as<CapabilityDecl>();
                out.push_back(symbol(c.name, kind::kSymbolInterface, whole, c.nameSpan, "capability"));
                break;
            }
            case DeclKind::Model: {
                const ModelDecl& m = d->as<ModelDecl>();
                out.push_back(symbol(m.name, kind::kSymbolObject, whole, m.nameSpan, "model"));
                break;
            }
            case DeclKind::Input: {
                const InputDecl& in = d->as<InputDecl>();
                out.push_back(symbol(in.name, kind::kSymbolVariable, whole, in.nameSpan, "input tags " + joined(in.tags)));
                break;
            }
        }
    }
    return out;
}

// ---------------------------------------------------------------- completion

namespace {

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Json item(const std::string& label, int itemKind, std::string detail = {}, std::string snippet = {}) {
    Json j = {{"label", label}, {"kind", itemKind}};
    if (!detail.empty()) j["detail"] = std::move(detail);
    if (!snippet.empty()) {
        j["insertText"] = std::move(snippet);
        j["insertTextFormat"] = kind::kInsertSnippet;
    }
    return j;
}

std::string capabilitySignature(const CapabilityDecl& c) {
    std::vector<std::string> params;
    for (const Param& p : c.params) params.push_back(p.name);
    return fmt::format("capability {}({})", c.name, joined(params));
}

std::string argumentSnippet(const std::string& name, const std::vector<std::string>& params) {
    std::string args;
    for (size_t i = 0; i < params.size(); ++i)
        args += fmt::format("{}${{{}:{}}}", i ? ", " : "", i + 1, params[i]);
    return fmt::format("{}({})", name, args);
}

}  // namespace

Json completion(const Query& q, Position position) {
    const Analysis& a = q.analysis;
    Json items = Json::array();
    // The text of the line before the cursor decides what fits there.
    size_t cursor = q.text.offsetOf(position, q.encoding);
    size_t lineStart = q.text.offsetOf(Position{position.line, 0}, q.encoding);
    std::string_view before = std::string_view(q.text.text()).substr(lineStart, cursor - lineStart);
    size_t word = before.size();
    while (word > 0 && isWordChar(before[word - 1])) --word;
    // `web.` or `Summarizer.`: what follows a qualifier.
    std::string qualifier;
    if (word > 0 && before[word - 1] == '.') {
        size_t start = word - 1;
        while (start > 0 && (isWordChar(before[start - 1]) || before[start - 1] == '.')) --start;
        qualifier = std::string(before.substr(start, word - 1 - start));
    }
    const HostInterface* host = a.host();
    std::vector<const CapabilityDecl*> capabilities;
    std::vector<const ModelDecl*> models;
    std::vector<std::string> hostTypes;
    if (host)
        for (const DeclPtr& d : host->decls) {
            if (d->kind == DeclKind::Capability) capabilities.push_back(&d->as<CapabilityDecl>());
            if (d->kind == DeclKind::Model) models.push_back(&d->as<ModelDecl>());
            if (d->kind == DeclKind::Type) hostTypes.push_back(d->as<TypeDecl>().name);
        }
    const std::vector<DeclPtr>* decls = programDecls(a);
    if (!qualifier.empty()) {
        std::set<std::string> seen;
        for (const CapabilityDecl* c : capabilities) {
            if (c->name.rfind(qualifier + ".", 0) != 0) continue;
            std::string rest = c->name.substr(qualifier.size() + 1);
            size_t dot = rest.find('.');
            if (dot != std::string::npos) {  // a deeper namespace
                if (seen.insert(rest.substr(0, dot)).second)
                    items.push_back(item(rest.substr(0, dot), kind::kCompletionModule, "capability namespace"));
                continue;
            }
            std::vector<std::string> params;
            for (const Param& p : c->params) params.push_back(p.name);
            items.push_back(item(rest, kind::kCompletionMethod, capabilitySignature(*c), argumentSnippet(rest, params)));
        }
        bool asks = std::any_of(models.begin(), models.end(), [&](const ModelDecl* m) { return m->name == qualifier; });
        if (decls && findDecl(*decls, DeclKind::Agent, qualifier)) asks = true;
        if (asks)
            items.push_back(item("ask", kind::kCompletionMethod, "ask(OutputType, prompt, context: ...)",
                                 "ask(${1:Type}, ${2:prompt})"));
        return {{"isIncomplete", false}, {"items", std::move(items)}};
    }
    bool inUses = false;
    {
        std::string_view line = before;
        size_t first = line.find_first_not_of(" \t");
        inUses = first != std::string_view::npos && line.substr(first, 4) == "uses" &&
                 (line.size() == first + 4 || !isWordChar(line[first + 4]));
    }
    for (const CapabilityDecl* c : capabilities) {
        std::vector<std::string> params;
        for (const Param& p : c->params) params.push_back(p.name);
        items.push_back(item(c->name, kind::kCompletionFunction, capabilitySignature(*c),
                             inUses ? std::string() : argumentSnippet(c->name, params)));
    }
    for (const ModelDecl* m : models) items.push_back(item(m->name, kind::kCompletionInterface, "model"));
    if (inUses) return {{"isIncomplete", false}, {"items", std::move(items)}};
    if (a.kind == DocumentKind::Host) items.clear();  // a host interface declares them; it calls nothing
    // Keywords (`import` and `as` are reserved only to name other languages' habits).
    static const char* const kKeywords[] = {
#define REMIT_X(name, text) text,
        REMIT_KEYWORDS(REMIT_X)
#undef REMIT_X
    };
    for (const char* k : kKeywords)
        if (std::string_view(k) != "import" && std::string_view(k) != "as")
            items.push_back(item(k, kind::kCompletionKeyword));
    for (const char* t : {"Int", "Float", "Bool", "Str", "Unit", "List"})
        items.push_back(item(t, kind::kCompletionStruct, "type"));
    for (const std::string& t : hostTypes) items.push_back(item(t, kind::kCompletionStruct, "host type"));
    if (a.kind == DocumentKind::Host) return {{"isIncomplete", false}, {"items", std::move(items)}};
    std::set<std::string_view> builtins;
    for (const BuiltinInfo& b : kBuiltins) {
        if (!builtins.insert(b.name).second) continue;
        std::vector<std::string> params;
        for (uint16_t i = 0; i < b.argc; ++i) params.push_back(fmt::format("arg{}", i + 1));
        items.push_back(
            item(std::string(b.name), kind::kCompletionFunction, "builtin", argumentSnippet(std::string(b.name), params)));
    }
    if (decls)
        for (const DeclPtr& d : *decls) {
            if (d->kind == DeclKind::Fn) {
                const FnDecl& f = d->as<FnDecl>();
                std::vector<std::string> params;
                for (const Param& p : f.params) params.push_back(p.name);
                items.push_back(item(f.name, kind::kCompletionFunction, fnSignature(a, f), argumentSnippet(f.name, params)));
            } else if (d->kind == DeclKind::Agent) {
                items.push_back(item(d->as<AgentDecl>().name, kind::kCompletionClass, "agent"));
            } else if (d->kind == DeclKind::Type) {
                items.push_back(item(d->as<TypeDecl>().name, kind::kCompletionStruct, "type"));
            }
        }
    return {{"isIncomplete", false}, {"items", std::move(items)}};
}

// ---------------------------------------------------------------- code lenses

Json codeLenses(const Query& q) {
    const Analysis& a = q.analysis;
    Json out = Json::array();
    if (a.kind != DocumentKind::Program || !a.outcome.checked || !a.outcome.program) return out;
    const CheckResult& checked = *a.outcome.checked;
    for (const DeclPtr& d : a.outcome.program->decls) {
        if (d->kind != DeclKind::Fn) continue;
        const FnDecl& f = d->as<FnDecl>();
        auto it = checked.facts.functions.find(f.name);
        if (it == checked.facts.functions.end()) continue;
        std::string title = "worst case: " + callsText(a, it->second.calls);
        if (f.name == "main" && checked.manifest.budgetUsd)
            title += fmt::format(" (budget {})", usd(*checked.manifest.budgetUsd));
        // No command to run: the lens is the information (an empty command shows it as text).
        out.push_back({{"range", rangeJson(q.text.rangeOf(f.nameSpan, q.encoding))},
                       {"command", {{"title", title}, {"command", ""}}}});
    }
    return out;
}

// ---------------------------------------------------------------- formatting

std::optional<Json> formatting(const Query& q, std::string& error) {
    const std::string& text = q.text.text();
    FormatOutcome formatted = formatText(q.analysis.file, text, q.analysis.kind == DocumentKind::Host);
    if (formatted.diags.hasErrors()) {
        const Diagnostic* first = nullptr;
        for (const Diagnostic& d : formatted.diags.items())
            if (d.isError()) {
                first = &d;
                break;
            }
        error = fmt::format("cannot format {}: it has errors, the first is {}", fileLeaf(q.analysis.file),
                            first ? fmt::format("{} at line {}: {}", diagInfo(first->code).code, first->span.line,
                                                first->message)
                                  : std::string("unknown"));
        return std::nullopt;
    }
    Json edits = Json::array();
    const std::string& after = formatted.formatted;
    if (after == text) return edits;
    // One edit over the lines that differ: the unchanged lines around them keep their place (and
    // the editor its cursor and folds).
    size_t prefix = 0, limit = std::min(text.size(), after.size());
    while (prefix < limit && text[prefix] == after[prefix]) ++prefix;
    prefix = text.rfind('\n', prefix == 0 ? 0 : prefix - 1);
    prefix = prefix == std::string::npos ? 0 : prefix + 1;
    size_t suffix = 0;
    while (suffix < text.size() - prefix && suffix < after.size() - prefix &&
           text[text.size() - 1 - suffix] == after[after.size() - 1 - suffix])
        ++suffix;
    // The unchanged end starts a line in both texts.
    auto startsLine = [](const std::string& s, size_t at) { return at == 0 || s[at - 1] == '\n'; };
    while (suffix > 0 && !(startsLine(text, text.size() - suffix) && startsLine(after, after.size() - suffix))) --suffix;
    size_t oldEnd = text.size() - suffix, newEnd = after.size() - suffix;
    Range range{q.text.positionOf(prefix, q.encoding), q.text.positionOf(oldEnd, q.encoding)};
    edits.push_back({{"range", rangeJson(range)}, {"newText", after.substr(prefix, newEnd - prefix)}});
    return edits;
}

}  // namespace remit::lsp
