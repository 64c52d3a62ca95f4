// The syntax tree of Remit programs (.rmt) and host interfaces (.rmti), produced by the parser and
// consumed by the formatter, the checker, the hasher and the code generator.
//
// Nodes are plain structs owned through unique_ptr; each has a Span and a NodeId that is unique
// within one parse (later phases key side tables by it). Comments are kept on the node they
// precede (`leading`) or end the line of (`trailing`) so that `remitc fmt` never drops one.
// Nothing here is semantic: names are not resolved and types are not checked.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/source.h"

namespace remit::ast {

// A node's identity within one parsed file (0 = none).
enum class NodeId : uint32_t { None = 0 };

struct Comments {
    std::vector<std::string> leading;  // own-line comments before the node, text includes '#'
    std::string trailing;              // a comment at the end of the node's last line, or empty
};

// ---------------------------------------------------------------- type expressions

enum class TypeKind : uint8_t {
    Named,   // Int, Str, List[T], Vendor, ...: `name`, `args`, optional `max`
    Record,  // { field: T, ... }
    Union,   // "a" | "b" (an enum of string literals)
};

struct TypeExpr;
using TypePtr = std::unique_ptr<TypeExpr>;

struct TypeField {
    std::string name;
    Span nameSpan;
    TypePtr type;
};

struct TypeExpr {
    TypeKind kind = TypeKind::Named;
    Span span;
    NodeId id{};
    std::string name;                  // Named
    std::vector<TypePtr> args;         // Named: List[T]
    std::optional<int64_t> max;        // Named: List[T] max N
    std::vector<TypeField> fields;     // Record
    std::vector<std::string> options;  // Union
};

// ---------------------------------------------------------------- expressions

enum class ExprKind : uint8_t {
    Int, Float, Bool, Str,  // literals
    Interp,                 // "text {expr} text"
    Name, Field, Index,
    List, Record,
    Unary, Binary,
    Call,
    If, For, Match,
};

enum class UnaryOp : uint8_t { Not, Neg };
enum class BinaryOp : uint8_t { Or, And, Eq, Ne, Lt, Le, Gt, Ge, In, Add, Sub, Mul, Div, Mod };

struct Expr;
struct Block;
using ExprPtr = std::unique_ptr<Expr>;
using BlockPtr = std::unique_ptr<Block>;

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Block {
    Span span;
    NodeId id{};
    std::vector<StmtPtr> stmts;
    std::vector<std::string> closingComments;  // own-line comments before the closing '}'
};

// One piece of an interpolated string: literal text, or an expression between braces.
struct InterpPart {
    std::string text;  // decoded literal text (when expr is null)
    ExprPtr expr;
};

struct CallArg {
    std::optional<std::string> name;  // `name: value` when named
    Span span;
    ExprPtr value;
};

struct RecordField {
    std::string name;
    Span nameSpan;
    ExprPtr value;
};

struct MatchArm {
    std::optional<std::string> pattern;  // a string literal; nullopt for `_`
    Span span;
    BlockPtr body;         // an expression arm is a block with one expression statement
    bool braced = false;   // the arm was written `=> { ... }`
    Comments comments;
};

// The base of every expression node; `kind` says which derived struct it is (see `as`).
struct Expr {
    ExprKind kind;
    Span span;
    NodeId id{};

    explicit Expr(ExprKind k) : kind(k) {}
    virtual ~Expr() = default;
    template <class T> T& as() { return static_cast<T&>(*this); }
    template <class T> const T& as() const { return static_cast<const T&>(*this); }
};

struct IntLit : Expr { int64_t value = 0; IntLit() : Expr(ExprKind::Int) {} };
struct FloatLit : Expr { double value = 0; FloatLit() : Expr(ExprKind::Float) {} };
struct BoolLit : Expr { bool value = false; BoolLit() : Expr(ExprKind::Bool) {} };
struct StrLit : Expr { std::string value; StrLit() : Expr(ExprKind::Str) {} };  // decoded text

struct InterpExpr : Expr {
    std::vector<InterpPart> parts;
    InterpExpr() : Expr(ExprKind::Interp) {}
};

struct NameExpr : Expr { std::string name; NameExpr() : Expr(ExprKind::Name) {} };

struct FieldExpr : Expr {  // object.name
    ExprPtr object;
    std::string name;
    Span nameSpan;
    FieldExpr() : Expr(ExprKind::Field) {}
};

struct IndexExpr : Expr {  // object[index]
    ExprPtr object;
    ExprPtr index;
    IndexExpr() : Expr(ExprKind::Index) {}
};

struct ListExpr : Expr { std::vector<ExprPtr> items; ListExpr() : Expr(ExprKind::List) {} };
struct RecordExpr : Expr { std::vector<RecordField> fields; RecordExpr() : Expr(ExprKind::Record) {} };

struct UnaryExpr : Expr {
    UnaryOp op = UnaryOp::Not;
    ExprPtr operand;
    UnaryExpr() : Expr(ExprKind::Unary) {}
};

struct BinaryExpr : Expr {
    BinaryOp op = BinaryOp::Add;
    ExprPtr left, right;
    BinaryExpr() : Expr(ExprKind::Binary) {}
};

// f(args), ns.cap(args), llm.ask(T, ...), Agent.ask(T, ...) with optional modifiers.
struct CallExpr : Expr {
    std::vector<std::string> callee;  // the dotted path
    Span calleeSpan;
    Span callSpan;  // the callee through its closing parenthesis, without retry/timeout/else
    // `.ask(T, prompt, context: e)`: the output type, when the first argument is written as a
    // type (`Summary`, `List[Str] max 5`, `{a: Int}`, `"yes" | "no"`). It is not among `args`.
    TypePtr askType;
    std::vector<CallArg> args;
    std::optional<int64_t> retry;
    std::optional<double> timeoutSeconds;
    ExprPtr fallback;  // `else E`
    CallExpr() : Expr(ExprKind::Call) {}
    std::string calleeName() const;  // "ns.cap"
};

struct IfExpr : Expr {
    ExprPtr cond;
    BlockPtr thenBlock;
    BlockPtr elseBlock;  // `else { ... }`
    ExprPtr elseIf;      // `else if ...` (an IfExpr); at most one of the two is set
    IfExpr() : Expr(ExprKind::If) {}
};

struct ForExpr : Expr {  // for var in iter limit N if filter { body }
    std::string var;
    Span varSpan;
    ExprPtr iter;
    std::optional<int64_t> limit;
    ExprPtr filter;
    BlockPtr body;
    ForExpr() : Expr(ExprKind::For) {}
};

struct MatchExpr : Expr {
    ExprPtr subject;
    std::vector<MatchArm> arms;
    std::vector<std::string> closingComments;  // own-line comments before the closing '}'
    MatchExpr() : Expr(ExprKind::Match) {}
};

// ---------------------------------------------------------------- statements

enum class StmtKind : uint8_t { Let, Assign, Return, Expr, Expect, Break };

struct Stmt {
    StmtKind kind;
    Span span;
    NodeId id{};
    Comments comments;

    std::string name;        // Let, Assign
    Span nameSpan;
    bool isVar = false;      // Let: `var` instead of `let`
    TypePtr type;            // Let: optional annotation
    ExprPtr value;           // Let, Assign, Return (optional), Expr, Expect (the condition)
    std::optional<std::string> message;  // Expect: `expect cond, "message"`

    explicit Stmt(StmtKind k) : kind(k) {}
};

// ---------------------------------------------------------------- declarations

struct Param {
    std::string name;
    Span span;
    TypePtr type;
    std::vector<std::string> deny;     // capability parameters only
    std::vector<std::string> approve;  // capability parameters only
};

struct TypeDecl {
    std::string name;
    Span nameSpan;
    TypePtr type;
};

struct FnDecl {
    std::string name;
    Span nameSpan;
    std::vector<Param> params;
    TypePtr ret;  // null: Unit
    BlockPtr body;
};

struct AgentDecl {
    std::string name;
    Span nameSpan;
    std::string model;
    Span modelSpan;
    std::string system;
    std::optional<int64_t> maxCalls;
    std::vector<std::string> innerComments;  // comments between the braces
};

struct TestDecl {
    std::string name;
    std::optional<std::string> fixtures;
    BlockPtr body;
};

struct CapabilityDecl {
    std::string name;  // dotted, e.g. "email.send"
    Span nameSpan;
    std::vector<Param> params;
    TypePtr ret;  // null: Unit
    std::vector<std::string> tags;
    std::vector<std::string> clears;
    double cost = 0;
    bool idempotent = false;
    bool approvalAlways = false;
    std::vector<std::string> innerComments;  // comments among the attribute lines
};

struct ModelDecl {
    std::string name;
    Span nameSpan;
    double cost = 0;
};

struct InputDecl {
    std::string name;
    Span nameSpan;
    std::vector<std::string> tags;
};

enum class DeclKind : uint8_t { Type, Fn, Agent, Test, Capability, Model, Input };

struct Decl {
    DeclKind kind;
    Span span;
    NodeId id{};
    Comments comments;
    std::variant<TypeDecl, FnDecl, AgentDecl, TestDecl, CapabilityDecl, ModelDecl, InputDecl> node;

    template <class T> T& as() { return std::get<T>(node); }
    template <class T> const T& as() const { return std::get<T>(node); }
};
using DeclPtr = std::unique_ptr<Decl>;

struct UseEntry {
    std::string name;  // "email.send" or "llm"
    Span span;
};

// A .rmt file: the header (`program`, `uses`, `budget`) and declarations in source order.
struct Program {
    std::string file;  // the name as given
    std::string name;
    Span span;         // the `program NAME` header
    std::vector<UseEntry> uses;
    std::optional<double> budgetUsd;
    Span budgetSpan;
    std::vector<DeclPtr> decls;  // Type, Fn, Agent and Test declarations

    std::vector<std::string> headerComments;  // before `program`
    std::string programTrailing;              // at the end of the `program` line
    std::vector<std::string> usesComments;    // around the `uses` and `budget` lines, own-line
    std::string usesTrailing;
    std::string budgetTrailing;
    std::vector<std::string> endComments;     // after the last declaration
    uint32_t nodeCount = 0;                   // every NodeId in this tree is below it

    const FnDecl* findFn(std::string_view fnName) const;
};

// A .rmti file: types, capabilities, models and inputs in source order.
struct HostInterface {
    std::string file;
    std::vector<DeclPtr> decls;  // Type, Capability, Model and Input declarations
    std::vector<std::string> endComments;
};

const char* binaryOpText(BinaryOp op);
// Loosest 1 (or) .. tightest 6 (* / %), as in the spec's precedence table.
int binaryPrecedence(BinaryOp op);

// The one walker over an expression's direct children, in source order (an `if`: condition, then
// block, `else if`, else block; a `for`: list, filter, body; a call: arguments, then the `else`
// fallback): `onExpr` for each child expression, `onBlock` for each child block (only if, for and
// match have blocks). Analyses that need every node recurse through it.
template <class OnExpr, class OnBlock>
void forEachChild(const Expr& e, OnExpr&& onExpr, OnBlock&& onBlock) {
    switch (e.kind) {
        case ExprKind::Int:
        case ExprKind::Float:
        case ExprKind::Bool:
        case ExprKind::Str:
        case ExprKind::Name: return;
        case ExprKind::Interp:
            for (const InterpPart& p : e.as<InterpExpr>().parts)
                if (p.expr) onExpr(*p.expr);
            return;
        case ExprKind::Field: onExpr(*e.as<FieldExpr>().object); return;
        case ExprKind::Index:
            onExpr(*e.as<IndexExpr>().object);
            onExpr(*e.as<IndexExpr>().index);
            return;
        case ExprKind::List:
            for (const ExprPtr& x : e.as<ListExpr>().items) onExpr(*x);
            return;
        case ExprKind::Record:
            for (const RecordField& f : e.as<RecordExpr>().fields) onExpr(*f.value);
            return;
        case ExprKind::Unary: onExpr(*e.as<UnaryExpr>().operand); return;
        case ExprKind::Binary:
            onExpr(*e.as<BinaryExpr>().left);
            onExpr(*e.as<BinaryExpr>().right);
            return;
        case ExprKind::Call: {
            const auto& c = e.as<CallExpr>();
            for (const CallArg& a : c.args) onExpr(*a.value);
            if (c.fallback) onExpr(*c.fallback);
            return;
        }
        case ExprKind::If: {
            const auto& i = e.as<IfExpr>();
            onExpr(*i.cond);
            onBlock(*i.thenBlock);
            if (i.elseIf) onExpr(*i.elseIf);
            if (i.elseBlock) onBlock(*i.elseBlock);
            return;
        }
        case ExprKind::For: {
            const auto& f = e.as<ForExpr>();
            onExpr(*f.iter);
            if (f.filter) onExpr(*f.filter);
            onBlock(*f.body);
            return;
        }
        case ExprKind::Match: {
            const auto& m = e.as<MatchExpr>();
            onExpr(*m.subject);
            for (const MatchArm& a : m.arms) onBlock(*a.body);
            return;
        }
    }
}

// The ways control can leave a block other than by reaching its end (strict flows' "exits",
// docs/language.md): a `return` anywhere inside it, or a `break` that is not inside a loop of its
// own (so it ends a loop around the block).
struct BlockExits {
    bool returns = false;
    bool breaks = false;
};
BlockExits exitsOf(const Block& b);
// Does a construct whose branch is `b` guard an exit — inside a loop (`inLoop`), a break counts?
inline bool guardsExit(const Block& b, bool inLoop) {
    BlockExits x = exitsOf(b);
    return x.returns || (inLoop && x.breaks);
}

}  // namespace remit::ast
