#include "compiler/ast_equal.h"

#include <cmath>

namespace remit {

using namespace ast;

namespace {

bool sameNumber(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool sameNumber(const std::optional<double>& a, const std::optional<double>& b) {
    if (!a || !b) return !a && !b;
    return sameNumber(*a, *b);
}

// Two owned children are the same when both are absent, or both present and `same`.
template <class T, class F>
bool samePtr(const std::unique_ptr<T>& a, const std::unique_ptr<T>& b, F same) {
    if (!a || !b) return !a && !b;
    return same(*a, *b);
}

template <class T, class F>
bool sameList(const std::vector<T>& a, const std::vector<T>& b, F same) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
    return true;
}

bool sameExprPtr(const ExprPtr& a, const ExprPtr& b) { return samePtr(a, b, sameExpr); }
bool sameTypePtr(const TypePtr& a, const TypePtr& b) { return samePtr(a, b, sameType); }

bool sameBlock(const Block& a, const Block& b);
bool sameBlockPtr(const BlockPtr& a, const BlockPtr& b) { return samePtr(a, b, sameBlock); }

bool sameStmt(const Stmt& a, const Stmt& b) {
    return a.kind == b.kind && a.name == b.name && a.isVar == b.isVar && sameTypePtr(a.type, b.type) &&
           sameExprPtr(a.value, b.value) && a.message == b.message;
}

bool sameBlock(const Block& a, const Block& b) {
    return sameList(a.stmts, b.stmts, [](const StmtPtr& x, const StmtPtr& y) { return samePtr(x, y, sameStmt); });
}

bool sameParams(const std::vector<Param>& a, const std::vector<Param>& b) {
    return sameList(a, b, [](const Param& x, const Param& y) {
        return x.name == y.name && sameTypePtr(x.type, y.type) && x.deny == y.deny && x.approve == y.approve;
    });
}

bool sameDecl(const Decl& a, const Decl& b) {
    if (a.kind != b.kind || a.node.index() != b.node.index()) return false;
    switch (a.kind) {
        case DeclKind::Type: {
            const auto &x = a.as<TypeDecl>(), &y = b.as<TypeDecl>();
            return x.name == y.name && sameTypePtr(x.type, y.type);
        }
        case DeclKind::Fn: {
            const auto &x = a.as<FnDecl>(), &y = b.as<FnDecl>();
            return x.name == y.name && sameParams(x.params, y.params) && sameTypePtr(x.ret, y.ret) &&
                   sameBlockPtr(x.body, y.body);
        }
        case DeclKind::Agent: {
            const auto &x = a.as<AgentDecl>(), &y = b.as<AgentDecl>();
            return x.name == y.name && x.model == y.model && x.system == y.system && x.maxCalls == y.maxCalls;
        }
        case DeclKind::Test: {
            const auto &x = a.as<TestDecl>(), &y = b.as<TestDecl>();
            return x.name == y.name && x.fixtures == y.fixtures && sameBlockPtr(x.body, y.body);
        }
        case DeclKind::Capability: {
            const auto &x = a.as<CapabilityDecl>(), &y = b.as<CapabilityDecl>();
            return x.name == y.name && sameParams(x.params, y.params) && sameTypePtr(x.ret, y.ret) &&
                   x.tags == y.tags && x.clears == y.clears && sameNumber(x.cost, y.cost) &&
                   x.idempotent == y.idempotent && x.approvalAlways == y.approvalAlways;
        }
        case DeclKind::Model: {
            const auto &x = a.as<ModelDecl>(), &y = b.as<ModelDecl>();
            return x.name == y.name && sameNumber(x.cost, y.cost);
        }
        case DeclKind::Input: {
            const auto &x = a.as<InputDecl>(), &y = b.as<InputDecl>();
            return x.name == y.name && x.tags == y.tags;
        }
    }
    return false;
}

bool sameDecls(const std::vector<DeclPtr>& a, const std::vector<DeclPtr>& b) {
    return sameList(a, b, [](const DeclPtr& x, const DeclPtr& y) { return samePtr(x, y, sameDecl); });
}

}  // namespace

bool sameType(const TypeExpr& a, const TypeExpr& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case TypeKind::Named: return a.name == b.name && a.max == b.max && sameList(a.args, b.args, sameTypePtr);
        case TypeKind::Record:
            return sameList(a.fields, b.fields, [](const TypeField& x, const TypeField& y) {
                return x.name == y.name && sameTypePtr(x.type, y.type);
            });
        case TypeKind::Union: return a.options == b.options;
    }
    return false;
}

bool sameExpr(const Expr& a, const Expr& b) {
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case ExprKind::Int: return a.as<IntLit>().value == b.as<IntLit>().value;
        case ExprKind::Float: return sameNumber(a.as<FloatLit>().value, b.as<FloatLit>().value);
        case ExprKind::Bool: return a.as<BoolLit>().value == b.as<BoolLit>().value;
        case ExprKind::Str: return a.as<StrLit>().value == b.as<StrLit>().value;
        case ExprKind::Interp:
            return sameList(a.as<InterpExpr>().parts, b.as<InterpExpr>().parts, [](const InterpPart& x, const InterpPart& y) {
                return x.text == y.text && sameExprPtr(x.expr, y.expr);
            });
        case ExprKind::Name: return a.as<NameExpr>().name == b.as<NameExpr>().name;
        case ExprKind::Field: {
            const auto &x = a.as<FieldExpr>(), &y = b.as<FieldExpr>();
            return x.name == y.name && sameExprPtr(x.object, y.object);
        }
        case ExprKind::Index: {
            const auto &x = a.as<IndexExpr>(), &y = b.as<IndexExpr>();
            return sameExprPtr(x.object, y.object) && sameExprPtr(x.index, y.index);
        }
        case ExprKind::List: return sameList(a.as<ListExpr>().items, b.as<ListExpr>().items, sameExprPtr);
        case ExprKind::Record:
            return sameList(a.as<RecordExpr>().fields, b.as<RecordExpr>().fields, [](const RecordField& x, const RecordField& y) {
                return x.name == y.name && sameExprPtr(x.value, y.value);
            });
        case ExprKind::Unary: {
            const auto &x = a.as<UnaryExpr>(), &y = b.as<UnaryExpr>();
            return x.op == y.op && sameExprPtr(x.operand, y.operand);
        }
        case ExprKind::Binary: {
            const auto &x = a.as<BinaryExpr>(), &y = b.as<BinaryExpr>();
            return x.op == y.op && sameExprPtr(x.left, y.left) && sameExprPtr(x.right, y.right);
        }
        case ExprKind::Call: {
            const auto &x = a.as<CallExpr>(), &y = b.as<CallExpr>();
            return x.callee == y.callee && sameTypePtr(x.askType, y.askType) &&
                   sameList(x.args, y.args, [](const CallArg& p, const CallArg& q) {
                       return p.name == q.name && sameExprPtr(p.value, q.value);
                   }) &&
                   x.retry == y.retry && sameNumber(x.timeoutSeconds, y.timeoutSeconds) &&
                   sameExprPtr(x.fallback, y.fallback);
        }
        case ExprKind::If: {
            const auto &x = a.as<IfExpr>(), &y = b.as<IfExpr>();
            return sameExprPtr(x.cond, y.cond) && sameBlockPtr(x.thenBlock, y.thenBlock) &&
                   sameBlockPtr(x.elseBlock, y.elseBlock) && sameExprPtr(x.elseIf, y.elseIf);
        }
        case ExprKind::For: {
            const auto &x = a.as<ForExpr>(), &y = b.as<ForExpr>();
            return x.var == y.var && sameExprPtr(x.iter, y.iter) && x.limit == y.limit &&
                   sameExprPtr(x.filter, y.filter) && sameBlockPtr(x.body, y.body);
        }
        case ExprKind::Match: {
            const auto &x = a.as<MatchExpr>(), &y = b.as<MatchExpr>();
            // `braced` is layout only: `"a" => { 1 }` and `"a" => 1` are the same arm.
            return sameExprPtr(x.subject, y.subject) &&
                   sameList(x.arms, y.arms, [](const MatchArm& p, const MatchArm& q) {
                       return p.pattern == q.pattern && sameBlockPtr(p.body, q.body);
                   });
        }
    }
    return false;
}

bool sameProgram(const Program& a, const Program& b) {
    return a.name == b.name &&
           sameList(a.uses, b.uses, [](const UseEntry& x, const UseEntry& y) { return x.name == y.name; }) &&
           sameNumber(a.budgetUsd, b.budgetUsd) && sameDecls(a.decls, b.decls);
}

bool sameHost(const HostInterface& a, const HostInterface& b) { return sameDecls(a.decls, b.decls); }

}  // namespace remit
