// The disassembler (bytecode/disasm.h). One function renders an operand from its kind; the rest lays out
// the tables. Every lookup is bounds-checked because the listing must also serve a module that
// failed verification (that is when a compiler author most wants to see it).
#include "bytecode/disasm.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "runtime/builtins.h"
#include "runtime/canonical_json.h"
#include "runtime/numfmt.h"
#include "bytecode/verifier.h"

namespace remit {

namespace {

// Operands start in this column and source positions in this one, so listings line up.
constexpr size_t kOperandColumn = 10;
constexpr size_t kSpanColumn = 44;
// A string constant inside an instruction is cut to this many bytes (the constants table has it whole).
constexpr size_t kInlineStringBytes = 40;

// `text` as a double-quoted, escaped string, cut after `maxBytes` (on a UTF-8 boundary) with "...".
std::string quoteText(std::string_view text, size_t maxBytes = std::string_view::npos) {
    std::string_view shown = utf8Prefix(text, maxBytes);
    bool cut = shown.size() < text.size();
    std::string out;
    appendJsonString(out, shown, /*ensureAscii=*/false);
    if (cut) out += "...";
    return out;
}

std::string plural(size_t n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); }

std::string spanText(const Span& s) { return fmt::format("{}:{}", s.line, s.col); }

// A field, parameter or argument name: bare when it looks like an identifier, quoted otherwise.
std::string bareName(std::string_view name) {
    bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    });
    return plain ? std::string(name) : quoteName(name);
}

std::string typeRef(uint32_t index) { return index == kNoType ? "none" : fmt::format("t{}", index); }

class Disassembler {
public:
    Disassembler(const Module& m, std::string_view source, std::string_view signer) : m_(m), signer_(signer) {
        // Split the source into lines once; a line's text excludes its newline (and a CR before it).
        size_t start = 0;
        while (start <= source.size() && !source.empty()) {
            size_t end = source.find('\n', start);
            std::string_view line = source.substr(start, end == std::string_view::npos ? end : end - start);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            lines_.push_back(line);
            if (end == std::string_view::npos) break;
            start = end + 1;
        }
    }

    std::string run() {
        header();
        constants();
        shapes();
        types();
        sites();
        agents();
        tests();
        for (uint32_t i = 0; i < m_.functions.size(); ++i) function(i);
        return std::move(out_);
    }

private:
    const Module& m_;
    std::string_view signer_;
    std::vector<std::string_view> lines_;
    std::string out_;

    template <class... Args>
    void line(fmt::format_string<Args...> format, Args&&... args) {
        fmt::format_to(std::back_inserter(out_), format, std::forward<Args>(args)...);
        out_ += '\n';
    }

    std::string fnRef(uint32_t index) const {
        if (index >= m_.functions.size()) return fmt::format("fn {} ?", index);
        return fmt::format("fn {} {}", index, quoteName(m_.functions[index].name));
    }

    std::string constantValue(uint32_t index, size_t maxBytes) const {
        if (index >= m_.constants.size()) return "?";
        const Constant& k = m_.constants[index];
        switch (k.kind) {
            case Constant::Kind::Int: return fmt::format("{}", k.i);
            case Constant::Kind::Float: return formatFloatRepr(k.f);
            case Constant::Kind::Str: return quoteText(k.s, maxBytes);
        }
        return "?";
    }

    std::string shapeText(uint32_t index) const {
        if (index >= m_.shapes.size()) return "?";
        std::string out = "{";
        for (size_t i = 0; i < m_.shapes[index].size(); ++i) out += (i ? ", " : "") + bareName(m_.shapes[index][i]);
        return out + "}";
    }

    void header() {
        line("; Remit bytecode: program {} from {}", quoteName(m_.programName), quoteName(m_.sourceFile));
        line("; program hash  {}", quoteName(m_.programHash));
        line("; host hash     {}", quoteName(m_.hostHash));
        if (!signer_.empty()) line("; signed by     {}", signer_);
        line("; budget        {}", m_.budgetUsd ? formatFloatRepr(*m_.budgetUsd) + " USD" : "none");
        line("; entry         {}", m_.entry == kNoType ? "none" : fnRef(m_.entry));
        line("; {}, {}, {}, {}, {}, {}, {}; manifest {}; stack {}", plural(m_.functions.size(), "function", "functions"),
             plural(m_.constants.size(), "constant", "constants"), plural(m_.shapes.size(), "shape", "shapes"),
             plural(m_.types.size(), "type", "types"), plural(m_.sites.size(), "site", "sites"),
             plural(m_.agents.size(), "agent", "agents"), plural(m_.tests.size(), "test", "tests"),
             plural(m_.manifestJson.size(), "byte", "bytes"), plural(m_.stackRegisters, "register", "registers"));
    }

    void constants() {
        if (m_.constants.empty()) return;
        line("\nconstants");
        for (uint32_t i = 0; i < m_.constants.size(); ++i) {
            static constexpr const char* kKinds[] = {"Int", "Float", "Str"};
            auto kind = static_cast<size_t>(m_.constants[i].kind);
            line("  k{:<4} {:<5} {}", i, kind < std::size(kKinds) ? kKinds[kind] : "?",
                 constantValue(i, std::string_view::npos));
        }
    }

    void shapes() {
        if (m_.shapes.empty()) return;
        line("\nshapes");
        for (uint32_t i = 0; i < m_.shapes.size(); ++i) line("  shape {} {}", i, shapeText(i));
    }

    void types() {
        if (m_.types.empty()) return;
        line("\ntypes");
        for (uint32_t i = 0; i < m_.types.size(); ++i) {
            const TypeEntry& t = m_.types[i];
            std::string text;
            switch (t.kind) {
                case TypeKind::Never: text = "Never"; break;
                case TypeKind::Unit: text = "Unit"; break;
                case TypeKind::Bool: text = "Bool"; break;
                case TypeKind::Int: text = "Int"; break;
                case TypeKind::Float: text = "Float"; break;
                case TypeKind::Str: text = "Str"; break;
                case TypeKind::Enum: text = "Enum"; break;
                case TypeKind::List: text = fmt::format("List[{}]", typeRef(t.elem)); break;
                case TypeKind::Record: text = "Record"; break;
                default: text = fmt::format("kind {}", static_cast<unsigned>(t.kind)); break;
            }
            if (!t.name.empty()) text += " " + quoteName(t.name);
            for (size_t o = 0; o < t.options.size(); ++o) text += (o ? " | " : " ") + quoteText(t.options[o]);
            if (t.max) text += fmt::format(" max {}", *t.max);
            if (t.kind == TypeKind::Record || !t.fields.empty()) {
                text += " {";
                for (size_t f = 0; f < t.fields.size(); ++f)
                    text += fmt::format("{}{}: {}", f ? ", " : "", bareName(t.fields[f].first), typeRef(t.fields[f].second));
                text += "}";
            }
            line("  t{:<4} {}", i, text);
        }
    }

    void sites() {
        if (m_.sites.empty()) return;
        line("\nsites");
        for (uint32_t i = 0; i < m_.sites.size(); ++i) {
            const Site& s = m_.sites[i];
            std::string text;
            switch (s.kind) {
                case SiteKind::Capability: text = "capability " + quoteName(s.resource); break;
                case SiteKind::Model: text = "model " + quoteName(s.resource); break;
                case SiteKind::Agent: text = fmt::format("agent {} model {}", quoteName(s.agent), quoteName(s.resource)); break;
                default: text = fmt::format("kind {}", static_cast<unsigned>(s.kind)); break;
            }
            text += "(";
            for (size_t a = 0; a < s.argNames.size(); ++a) text += (a ? ", " : "") + bareName(s.argNames[a]);
            text += ")";
            if (s.askType != kNoType) text += " as " + typeRef(s.askType);
            text += " in " + fnRef(s.function);
            if (s.retry) text += fmt::format(" retry {}", s.retry);
            if (s.timeoutSeconds) text += " timeout " + formatFloatRepr(*s.timeoutSeconds) + "s";
            if (s.hasFallback) text += " fallback";
            line("  site {} {} {} at {}", i, quoteName(s.id), text, spanText(s.span));
        }
    }

    void agents() {
        if (m_.agents.empty()) return;
        line("\nagents");
        for (const Agent& a : m_.agents) {
            std::string maxCalls = a.maxCalls ? fmt::format(" max_calls {}", *a.maxCalls) : "";
            line("  agent {} model {}{} system {}", quoteName(a.name), quoteName(a.model), maxCalls, quoteText(a.system));
        }
    }

    void tests() {
        if (m_.tests.empty()) return;
        line("\ntests");
        for (const TestCase& t : m_.tests) {
            std::string fixtures = t.fixtures ? " fixtures " + quoteText(*t.fixtures) : "";
            line("  test {} {}{} at {}", quoteName(t.name), fnRef(t.function), fixtures, spanText(t.span));
        }
    }

    // One operand as its kind says; `value` is Bx for the Bx kinds.
    std::string operand(Operand kind, uint32_t value) const {
        switch (kind) {
            case Operand::None: return {};
            case Operand::Reg:
            case Operand::Dst:
            case Operand::Win: return fmt::format("r{}", value);
            case Operand::Imm: return fmt::format("{}", value);
            case Operand::KBx:
            case Operand::KStr:
            case Operand::KIntBx:
            case Operand::KStrBx: return fmt::format("k{} {}", value, constantValue(value, kInlineStringBytes));
            case Operand::JumpBx: return fmt::format("->{}", value);
            case Operand::Skip: return fmt::format("skip {}", value);
            case Operand::Fn: return fnRef(value);
            case Operand::Shape: return fmt::format("shape {} {}", value, shapeText(value));
            case Operand::Builtin:
                return value < kBuiltinCount ? fmt::format("builtin '{}'", kBuiltins[value].name)
                                             : fmt::format("builtin {} ?", value);
            case Operand::Site:
                return value < m_.sites.size() ? fmt::format("site {} {}", value, quoteName(m_.sites[value].id))
                                               : fmt::format("site {} ?", value);
            case Operand::Branch:  // its target is the next line's JMP
                return value == 0 ? std::string() : fmt::format("{} ?", value);
        }
        return "?";
    }

    std::string instruction(const Instr& in) const {
        if (static_cast<size_t>(in.op) >= kOpCount) {
            return fmt::format("{:<{}}{}, {}, {}, {}", fmt::format("op{}", static_cast<unsigned>(in.op)),
                               kOperandColumn, in.reserved, in.a, in.b, in.c);
        }
        const OpInfo& info = opInfo(in.op);
        bool bx = isBxOperand(info.b);
        std::string operands;
        for (const std::string& text :
             {operand(info.a, in.a), operand(info.b, bx ? in.bx() : in.b), bx ? std::string() : operand(info.c, in.c)})
            if (!text.empty()) operands += (operands.empty() ? "" : ", ") + text;
        return fmt::format("{:<{}}{}", info.name, kOperandColumn, operands);
    }

    void function(uint32_t index) {
        const Function& f = m_.functions[index];
        std::string params;
        for (size_t p = 0; p < f.paramNames.size(); ++p)
            params += fmt::format("{}{}: {}", p ? ", " : "", bareName(f.paramNames[p]),
                                  p < f.paramTypes.size() ? typeRef(f.paramTypes[p]) : "?");
        std::string returns = f.returnType == kNoType ? "" : " -> " + typeRef(f.returnType);
        line("\n{}({}){}; {}, {}", fnRef(index), params, returns, plural(f.numRegs, "register", "registers"),
             plural(f.code.size(), "instruction", "instructions"));
        size_t width = fmt::formatted_size("{}", f.code.empty() ? 0 : f.code.size() - 1);
        uint32_t shownLine = 0;
        for (size_t pc = 0; pc < f.code.size(); ++pc) {
            const Span* span = pc < f.spans.size() ? &f.spans[pc] : nullptr;
            if (span && span->line != shownLine && span->line >= 1 && span->line <= lines_.size()) {
                shownLine = span->line;
                line("{:>{}} | {}", shownLine, width + 4, lines_[shownLine - 1]);
            }
            std::string text = fmt::format("  {:>{}}  {}", pc, width, instruction(f.code[pc]));
            if (span) {
                text.resize(std::max(text.size() + 1, kSpanColumn), ' ');
                text += "; " + spanText(*span);
            }
            line("{}", text);
        }
    }
};

}  // namespace

std::string disassemble(const Module& module, std::string_view sourceText, std::string_view signer) {
    return Disassembler(module, sourceText, signer).run();
}

}  // namespace remit
