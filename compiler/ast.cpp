#include "compiler/ast.h"

namespace remit::ast {

std::string CallExpr::calleeName() const {
    std::string out;
    for (const std::string& part : callee) {
        if (!out.empty()) out += '.';
        out += part;
    }
    return out;
}

const FnDecl* Program::findFn(std::string_view fnName) const {
    for (const DeclPtr& d : decls)
        if (d->kind == DeclKind::Fn && d->as<FnDecl>().name == fnName) return &d->as<FnDecl>();
    return nullptr;
}

const char* binaryOpText(BinaryOp op) {
    switch (op) {
        case BinaryOp::Or: return "or";
        case BinaryOp::And: return "and";
        case BinaryOp::Eq: return "==";
        case BinaryOp::Ne: return "!=";
        case BinaryOp::Lt: return "<";
        case BinaryOp::Le: return "<=";
        case BinaryOp::Gt: return ">";
        case BinaryOp::Ge: return ">=";
        case BinaryOp::In: return "in";
        case BinaryOp::Add: return "+";
        case BinaryOp::Sub: return "-";
        case BinaryOp::Mul: return "*";
        case BinaryOp::Div: return "/";
        case BinaryOp::Mod: return "%";
    }
    return "?";
}

int binaryPrecedence(BinaryOp op) {
    switch (op) {
        case BinaryOp::Or: return 1;
        case BinaryOp::And: return 2;
        case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le:
        case BinaryOp::Gt: case BinaryOp::Ge: case BinaryOp::In: return 4;
        case BinaryOp::Add: case BinaryOp::Sub: return 5;
        case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Mod: return 6;
    }
    return 0;
}

BlockExits exitsOf(const Block& b) {
    BlockExits out;
    auto inExpr = [&](auto&& self, const Expr& e) -> void {
        bool loop = e.kind == ExprKind::For;  // a loop's breaks end that loop, not ours
        forEachChild(
            e, [&](const Expr& child) { self(self, child); },
            [&](const Block& inner) {
                BlockExits x = exitsOf(inner);
                out.returns = out.returns || x.returns;
                if (!loop) out.breaks = out.breaks || x.breaks;
            });
    };
    for (const StmtPtr& st : b.stmts) {
        if (st->kind == StmtKind::Return) out.returns = true;
        if (st->kind == StmtKind::Break) out.breaks = true;
        if (st->value) inExpr(inExpr, *st->value);
    }
    return out;
}

}  // namespace remit::ast
