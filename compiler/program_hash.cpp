#include "compiler/program_hash.h"

#include <charconv>
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/hash.h"

namespace remit {

using namespace ast;

namespace {

// Bump when the canonical text changes in any way: every stored hash changes with it.
constexpr const char* kProgramVersion = "remit-hash-v1\n";
constexpr const char* kHostVersion = "remit-host-hash-v1\n";

// Writes the canonical text as S-expressions. Every node is `(head field ...)` with a fixed
// number of fields per head, and every variable-length sequence is its own parenthesised list,
// so two different trees never give the same text. Absent optionals are `nil`; strings are
// always quoted and escaped, so `nil` or `_` can never be confused with a string's value.
//
// Recursion follows the tree, whose depth the parser bounds (FrontendLimits::maxNesting).
class Canon {
public:
    explicit Canon(const char* version) { put(version); }

    std::string take() {
        buf_.resize(len_);
        return std::move(buf_);
    }

    void open(const char* head) {
        separate();
        put('(');
        put(head);
    }
    void close() { put(')'); }
    void newline() { put('\n'); }

    void atom(const char* text) {
        separate();
        put(text);
    }
    void boolean(bool value) { atom(value ? "true" : "false"); }

    void integer(int64_t value) {
        char buf[24];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
        (void)ec;  // 24 bytes always hold an int64
        separate();
        put(std::string_view(buf, static_cast<size_t>(end - buf)));
    }

    // The shortest digits that read back as exactly this double, so distinct values (including
    // 0.0 and -0.0) never print alike and equal values always do.
    void number(double value) {
        char buf[32];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
        (void)ec;  // 32 bytes always hold the shortest form of a double
        separate();
        put(std::string_view(buf, static_cast<size_t>(end - buf)));
    }

    // JSON-style escaping: quote, backslash and control bytes are escaped, every other byte
    // (including UTF-8) is copied. The mapping is injective and the value is delimited.
    void str(std::string_view value) {
        separate();
        put('"');
        size_t run = 0;  // bytes copied as they are, appended in one go
        for (size_t i = 0; i < value.size(); ++i) {
            char c = value[i];
            auto byte = static_cast<unsigned char>(c);
            bool plain = c != '"' && c != '\\' && byte >= 0x20 && byte != 0x7f;
            if (plain) continue;
            put(value.substr(run, i - run));
            run = i + 1;
            if (c == '"' || c == '\\') {
                put('\\');
                put(c);
            } else {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", byte);
                put(std::string_view(buf));
            }
        }
        put(value.substr(run));
        put('"');
    }

    void optStr(const std::optional<std::string>& value) { value ? str(*value) : atom("nil"); }
    void optInt(const std::optional<int64_t>& value) { value ? integer(*value) : atom("nil"); }
    void optNumber(const std::optional<double>& value) { value ? number(*value) : atom("nil"); }

    void strList(const char* head, const std::vector<std::string>& items) {
        open(head);
        for (const std::string& s : items) str(s);
        close();
    }

private:
    // A space between items, none right after an opening parenthesis or a line break.
    void separate() {
        if (len_ != 0 && buf_[len_ - 1] != '(' && buf_[len_ - 1] != '\n') put(' ');
    }

    // The text is written into a buffer grown by doubling and cut to length at the end: appending
    // to a std::string one character at a time was a call per character, a third of the
    // canonical form's cost on a large program.
    char* room(size_t n) {
        if (buf_.size() - len_ < n) [[unlikely]]
            grow(n);
        char* at = buf_.data() + len_;
        len_ += n;
        return at;
    }
    [[gnu::noinline]] void grow(size_t n) { buf_.resize(std::max(buf_.size() * 2, len_ + n + 4096)); }
    void put(char c) { *room(1) = c; }
    void put(std::string_view text) {
        if (!text.empty()) std::memcpy(room(text.size()), text.data(), text.size());
    }
    void put(const char* text) { put(std::string_view(text)); }

    std::string buf_;
    size_t len_ = 0;  // the bytes of buf_ written so far
};

const char* unaryOpName(UnaryOp op) {
    switch (op) {
        case UnaryOp::Not: return "not";
        case UnaryOp::Neg: return "neg";
    }
    return "?";
}

void writeType(Canon& c, const TypeExpr* type);
void writeExpr(Canon& c, const Expr* expr);
void writeBlock(Canon& c, const Block* block);

void writeType(Canon& c, const TypeExpr* type) {
    if (!type) return c.atom("nil");
    switch (type->kind) {
        case TypeKind::Named:
            c.open("named");
            c.str(type->name);
            c.open("args");
            for (const TypePtr& arg : type->args) writeType(c, arg.get());
            c.close();
            c.optInt(type->max);
            c.close();
            return;
        case TypeKind::Record:
            c.open("record");
            for (const TypeField& f : type->fields) {
                c.open("field");
                c.str(f.name);
                writeType(c, f.type.get());
                c.close();
            }
            c.close();
            return;
        case TypeKind::Union:
            c.strList("union", type->options);
            return;
    }
}

void writeCall(Canon& c, const CallExpr& call) {
    c.open("call");
    c.strList("callee", call.callee);
    writeType(c, call.askType.get());  // `.ask(T, ...)`: the requested output type, or nil
    c.open("args");
    for (const CallArg& arg : call.args) {
        c.open("arg");
        c.optStr(arg.name);
        writeExpr(c, arg.value.get());
        c.close();
    }
    c.close();
    c.optInt(call.retry);
    c.optNumber(call.timeoutSeconds);
    writeExpr(c, call.fallback.get());
    c.close();
}

void writeExpr(Canon& c, const Expr* expr) {
    if (!expr) return c.atom("nil");
    switch (expr->kind) {
        case ExprKind::Int:
            c.open("int");
            c.integer(expr->as<IntLit>().value);
            break;
        case ExprKind::Float:
            c.open("float");
            c.number(expr->as<FloatLit>().value);
            break;
        case ExprKind::Bool:
            c.open("bool");
            c.boolean(expr->as<BoolLit>().value);
            break;
        case ExprKind::Str:
            c.open("str");
            c.str(expr->as<StrLit>().value);
            break;
        case ExprKind::Interp:
            c.open("interp");
            for (const InterpPart& part : expr->as<InterpExpr>().parts) {
                if (part.expr) {
                    c.open("expr");
                    writeExpr(c, part.expr.get());
                } else {
                    c.open("text");
                    c.str(part.text);
                }
                c.close();
            }
            break;
        case ExprKind::Name:
            c.open("name");
            c.str(expr->as<NameExpr>().name);
            break;
        case ExprKind::Field: {
            const auto& e = expr->as<FieldExpr>();
            c.open("field");
            writeExpr(c, e.object.get());
            c.str(e.name);
            break;
        }
        case ExprKind::Index: {
            const auto& e = expr->as<IndexExpr>();
            c.open("index");
            writeExpr(c, e.object.get());
            writeExpr(c, e.index.get());
            break;
        }
        case ExprKind::List:
            c.open("list");
            for (const ExprPtr& item : expr->as<ListExpr>().items) writeExpr(c, item.get());
            break;
        case ExprKind::Record:
            c.open("record");
            for (const RecordField& f : expr->as<RecordExpr>().fields) {
                c.open("field");
                c.str(f.name);
                writeExpr(c, f.value.get());
                c.close();
            }
            break;
        case ExprKind::Unary: {
            const auto& e = expr->as<UnaryExpr>();
            c.open("unary");
            c.atom(unaryOpName(e.op));
            writeExpr(c, e.operand.get());
            break;
        }
        case ExprKind::Binary: {
            const auto& e = expr->as<BinaryExpr>();
            c.open("binary");
            c.atom(binaryOpText(e.op));
            writeExpr(c, e.left.get());
            writeExpr(c, e.right.get());
            break;
        }
        case ExprKind::Call:
            return writeCall(c, expr->as<CallExpr>());
        case ExprKind::If: {
            const auto& e = expr->as<IfExpr>();
            c.open("if");
            writeExpr(c, e.cond.get());
            writeBlock(c, e.thenBlock.get());
            writeBlock(c, e.elseBlock.get());
            writeExpr(c, e.elseIf.get());
            break;
        }
        case ExprKind::For: {
            const auto& e = expr->as<ForExpr>();
            c.open("for");
            c.str(e.var);
            writeExpr(c, e.iter.get());
            c.optInt(e.limit);
            writeExpr(c, e.filter.get());
            writeBlock(c, e.body.get());
            break;
        }
        case ExprKind::Match: {
            const auto& e = expr->as<MatchExpr>();
            c.open("match");
            writeExpr(c, e.subject.get());
            // `braced` is left out: `"a" => { 1 }` and `"a" => 1` are the same arm.
            for (const MatchArm& arm : e.arms) {
                c.open("arm");
                c.optStr(arm.pattern);
                writeBlock(c, arm.body.get());
                c.close();
            }
            break;
        }
    }
    c.close();
}

void writeStmt(Canon& c, const Stmt& stmt) {
    switch (stmt.kind) {
        case StmtKind::Let:
            c.open(stmt.isVar ? "var" : "let");
            c.str(stmt.name);
            writeType(c, stmt.type.get());
            writeExpr(c, stmt.value.get());
            break;
        case StmtKind::Assign:
            c.open("assign");
            c.str(stmt.name);
            writeExpr(c, stmt.value.get());
            break;
        case StmtKind::Return:
            c.open("return");
            writeExpr(c, stmt.value.get());
            break;
        case StmtKind::Expr:
            c.open("expr");
            writeExpr(c, stmt.value.get());
            break;
        case StmtKind::Expect:
            c.open("expect");
            writeExpr(c, stmt.value.get());
            c.optStr(stmt.message);
            break;
        case StmtKind::Break:
            c.open("break");
            break;
    }
    c.close();
}

void writeBlock(Canon& c, const Block* block) {
    if (!block) return c.atom("nil");
    c.open("block");
    for (const StmtPtr& stmt : block->stmts) writeStmt(c, *stmt);
    c.close();
}

void writeParams(Canon& c, const std::vector<Param>& params) {
    c.open("params");
    for (const Param& p : params) {
        c.open("param");
        c.str(p.name);
        writeType(c, p.type.get());
        c.strList("deny", p.deny);
        c.strList("approve", p.approve);
        c.close();
    }
    c.close();
}

// One declaration per line, so a canonical text shown for debugging diffs readably.
void writeDecl(Canon& c, const Decl& decl) {
    switch (decl.kind) {
        case DeclKind::Type: {
            const auto& d = decl.as<TypeDecl>();
            c.open("type");
            c.str(d.name);
            writeType(c, d.type.get());
            break;
        }
        case DeclKind::Fn: {
            const auto& d = decl.as<FnDecl>();
            c.open("fn");
            c.str(d.name);
            writeParams(c, d.params);
            writeType(c, d.ret.get());
            writeBlock(c, d.body.get());
            break;
        }
        case DeclKind::Agent: {
            const auto& d = decl.as<AgentDecl>();
            c.open("agent");
            c.str(d.name);
            c.str(d.model);
            c.str(d.system);
            c.optInt(d.maxCalls);
            break;
        }
        case DeclKind::Test: {
            const auto& d = decl.as<TestDecl>();
            c.open("test");
            c.str(d.name);
            c.optStr(d.fixtures);
            writeBlock(c, d.body.get());
            break;
        }
        case DeclKind::Capability: {
            const auto& d = decl.as<CapabilityDecl>();
            c.open("capability");
            c.str(d.name);
            writeParams(c, d.params);
            writeType(c, d.ret.get());
            c.strList("tags", d.tags);
            c.strList("clears", d.clears);
            c.number(d.cost);
            c.boolean(d.idempotent);
            c.boolean(d.approvalAlways);
            break;
        }
        case DeclKind::Model: {
            const auto& d = decl.as<ModelDecl>();
            c.open("model");
            c.str(d.name);
            c.number(d.cost);
            break;
        }
        case DeclKind::Input: {
            const auto& d = decl.as<InputDecl>();
            c.open("input");
            c.str(d.name);
            c.strList("tags", d.tags);
            break;
        }
    }
    c.close();
    c.newline();
}

// ---------------------------------------------------------------- call-site walk

// Numbers effectful calls in one function body in the prototype's pre-order field walk.
class SiteWalker {
public:
    SiteWalker(const std::string& function, const std::function<bool(const CallExpr&)>& isEffectful,
               std::vector<CallSite>& out)
        : function_(function), isEffectful_(isEffectful), out_(out) {}

    void block(const Block* b) {
        if (!b) return;
        for (const StmtPtr& stmt : b->stmts) expr(stmt->value.get());  // Let/Assign/Return/Expr/Expect
    }

    void expr(const Expr* e) {
        if (!e) return;
        switch (e->kind) {
            case ExprKind::Int:
            case ExprKind::Float:
            case ExprKind::Bool:
            case ExprKind::Str:
            case ExprKind::Name:
                return;
            case ExprKind::Interp:
                for (const InterpPart& part : e->as<InterpExpr>().parts) expr(part.expr.get());
                return;
            case ExprKind::Field: return expr(e->as<FieldExpr>().object.get());
            case ExprKind::Index:
                expr(e->as<IndexExpr>().object.get());
                expr(e->as<IndexExpr>().index.get());
                return;
            case ExprKind::List:
                for (const ExprPtr& item : e->as<ListExpr>().items) expr(item.get());
                return;
            case ExprKind::Record:
                for (const RecordField& f : e->as<RecordExpr>().fields) expr(f.value.get());
                return;
            case ExprKind::Unary: return expr(e->as<UnaryExpr>().operand.get());
            case ExprKind::Binary:
                expr(e->as<BinaryExpr>().left.get());
                expr(e->as<BinaryExpr>().right.get());
                return;
            case ExprKind::Call: {
                const auto& call = e->as<CallExpr>();
                // Numbered before its arguments although it runs after them: the prototype's
                // order, which traces and approvals depend on.
                if (isEffectful_(call)) {
                    out_.push_back(CallSite{function_ + "#" + std::to_string(next_), &call, function_});
                    ++next_;
                }
                for (const CallArg& arg : call.args) expr(arg.value.get());
                expr(call.fallback.get());
                return;
            }
            case ExprKind::If: {
                const auto& x = e->as<IfExpr>();
                expr(x.cond.get());
                block(x.thenBlock.get());
                block(x.elseBlock.get());
                expr(x.elseIf.get());
                return;
            }
            case ExprKind::For: {
                const auto& x = e->as<ForExpr>();
                // The filter comes after the body: the prototype's field order, not evaluation order.
                expr(x.iter.get());
                block(x.body.get());
                expr(x.filter.get());
                return;
            }
            case ExprKind::Match: {
                const auto& x = e->as<MatchExpr>();
                expr(x.subject.get());
                for (const MatchArm& arm : x.arms) block(arm.body.get());
                return;
            }
        }
    }

private:
    const std::string& function_;
    const std::function<bool(const CallExpr&)>& isEffectful_;
    std::vector<CallSite>& out_;
    size_t next_ = 0;
};

}  // namespace

std::string canonicalProgram(const Program& program) {
    Canon c(kProgramVersion);
    c.open("program");
    c.str(program.name);
    c.close();
    c.newline();
    c.open("uses");
    for (const UseEntry& use : program.uses) c.str(use.name);
    c.close();
    c.newline();
    c.open("budget");
    c.optNumber(program.budgetUsd);
    c.close();
    c.newline();
    for (const DeclPtr& decl : program.decls) writeDecl(c, *decl);
    return c.take();
}

std::string canonicalHost(const HostInterface& host) {
    Canon c(kHostVersion);
    for (const DeclPtr& decl : host.decls) writeDecl(c, *decl);
    return c.take();
}

std::string programHash(const Program& program) { return sha256Hex(canonicalProgram(program)); }

std::string hostHash(const HostInterface& host) { return sha256Hex(canonicalHost(host)); }

std::vector<CallSite> numberCallSites(const Program& program,
                                      const std::function<bool(const CallExpr&)>& isEffectful) {
    std::vector<CallSite> sites;
    for (const DeclPtr& decl : program.decls) {
        if (decl->kind != DeclKind::Fn) continue;  // tests are never numbered; agents have no body
        const FnDecl& fn = decl->as<FnDecl>();
        SiteWalker walker(fn.name, isEffectful, sites);
        walker.block(fn.body.get());
    }
    return sites;
}

std::unordered_map<const CallExpr*, std::string> siteIdsByCall(const std::vector<CallSite>& sites) {
    std::unordered_map<const CallExpr*, std::string> ids;
    ids.reserve(sites.size());
    for (const CallSite& site : sites) ids.emplace(site.call, site.id);
    return ids;
}

}  // namespace remit
