// Unit tests for the .rbc format (bytecode/rbc.h), the verifier (bytecode/verifier.h) and the disassembler
// (bytecode/disasm.h) on hand-built modules: the round trip writeRbc -> loadRbc keeps every field; each
// loader failure and each verifier rule has a negative test, checked both on the module and
// through a written file; truncating or corrupting a file anywhere fails cleanly; the call graph
// rejects recursion and sizes the register stack; the listing format is pinned.
//
// Pinned here on purpose (a failure means the .rbc format changed — bump kRbcVersion):
// the opcode numbers, the builtin ids, and the bytes of the sample modules, which are also the
// fuzzer's seed corpus (tests/fuzz/corpus/rbc/). After an intended change, regenerate them with
//   REMIT_UPDATE_RBC_CORPUS=1 build/tests/remit_unit_tests -tc='rbc: *'
// and update the opcode table in docs/bytecode.md from the test's message.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vm/run.h"
#include "runtime/builtins.h"
#include "tests/fuzz/run_module.h"
#include "bytecode/disasm.h"
#include "bytecode/rbc.h"
#include "bytecode/verifier.h"

// The test build defines the repository root; this fallback is for building the file by hand.
#ifndef REMIT_SOURCE_DIR
#define REMIT_SOURCE_DIR "/work/main"
#endif

using namespace remit;

namespace {

const std::string kHashA(64, 'a');
const std::string kHashB = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Instr abc(Op op, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0) { return Instr::abc(op, a, b, c); }
Instr abx(Op op, uint16_t a, uint32_t bx) { return Instr::abx(op, a, bx); }

Span at(uint32_t line, uint32_t col) { return Span{line, col, line, col + 1}; }

// A function whose instruction i comes from source line lines[i] (column 3).
Function function(std::string name, std::vector<std::string> params, std::vector<uint32_t> types, uint32_t returns,
                  uint32_t regs, std::vector<Instr> code, std::vector<uint32_t> lines) {
    Function f;
    f.name = std::move(name);
    f.paramNames = std::move(params);
    f.paramTypes = std::move(types);
    f.returnType = returns;
    f.numRegs = regs;
    f.code = std::move(code);
    for (size_t i = 0; i < f.code.size(); ++i) f.spans.push_back(at(i < lines.size() ? lines[i] : 0, 3));
    return f;
}

// The module with its program hash computed from its content, as buildProgram leaves it and as
// loadRbc requires of a file (a module edited after sealing must be sealed again to load).
Module sealed(Module m) {
    sealProgramHash(m);
    return m;
}

Module emptyModule(std::string name) {
    Module m;
    m.programName = std::move(name);
    m.sourceFile = m.programName + ".rmt";
    m.programHash = kHashA;
    m.hostHash = kHashB;
    m.manifestJson = "{}";
    return m;
}

// The smallest program: `fn main() {}`.
Module minimalModule() {
    Module m = emptyModule("minimal");
    m.functions.push_back(function("main", {}, {}, kNoType, 0, {abc(Op::RETUNIT)}, {1}));
    m.entry = 0;
    return sealed(std::move(m));
}

const char* const kSampleSource =
    "program triage\n"                                              // 1
    "fn helper(x: Int) -> Int { x + 1 }\n"                          // 2
    "fn main(topic: Str) -> Int {\n"                                // 3
    "  let n = helper(42)\n"                                        // 4
    "  let size = len(topic)\n"                                     // 5
    "  let r = {a: n, b: size}\n"                                   // 6
    "  let hits = web.search(topic) else []\n"                      // 7
    "  let level = Writer.ask(topic, r)\n"                          // 8
    "  n\n"                                                         // 9
    "}\n"                                                           // 10
    "test \"adds\" { expect true, \"hello\" }\n";                   // 11

// Every table in use: constants of each kind, a shape, types of each structure, three functions
// (a call, a builtin, a record, a capability call with a fallback, an agent call, a test), two
// sites, an agent, a test, a budget and an entry.
Module sampleModule() {
    Module m = emptyModule("triage");
    m.budgetUsd = 0.5;
    m.constants = {{Constant::Kind::Int, 42, 0, ""},
                   {Constant::Kind::Float, 0, 1.5, ""},
                   {Constant::Kind::Str, 0, 0, "hello"},
                   {Constant::Kind::Int, -7, 0, ""}};
    m.shapes = {{"a", "b"}};
    TypeEntry tInt, tStr, tList, tRecord, tEnum;
    tInt.kind = TypeKind::Int;
    tStr.kind = TypeKind::Str;
    tList.kind = TypeKind::List;
    tList.elem = 1;
    tList.max = 5;
    tRecord.kind = TypeKind::Record;
    tRecord.name = "Hit";
    tRecord.fields = {{"url", 1}, {"n", 0}};
    tEnum.kind = TypeKind::Enum;
    tEnum.name = "Level";
    tEnum.options = {"low", "high"};
    m.types = {tInt, tStr, tList, tRecord, tEnum};

    m.functions.push_back(function("main", {"topic"}, {1}, 0, 8,
                                   {
                                       abx(Op::LOADK, 1, 0),                              // n = 42
                                       abc(Op::MOVE, 3, 1),                               // helper's argument
                                       abc(Op::CALL, 2, 1, 3),                            // helper(n)
                                       abc(Op::BUILTIN, 4, 0, uint16_t(BuiltinId::Len)),  // len(topic)
                                       abc(Op::NEWRECORD, 5, 1, 0),                       // {a: n, b: size}
                                       abc(Op::CALLCAP, 6, 0, 0),                         // web.search(topic)
                                       abx(Op::JMP, 0, 8),                                // over the fallback
                                       abc(Op::NEWLIST, 6, 7, 0),                         // else []
                                       abc(Op::ASKMODEL, 7, 0, 1),                        // Writer.ask(topic, r)
                                       abc(Op::RET, 2),
                                   },
                                   {4, 4, 4, 5, 6, 7, 7, 7, 8, 9}));
    m.functions.push_back(function("helper", {"x"}, {0}, 0, 2,
                                   {abc(Op::LOADI, 1, 1), abc(Op::ADDI, 1, 0, 1), abc(Op::RET, 1)}, {2, 2, 2}));
    m.functions.push_back(function("test:adds", {}, {}, kNoType, 1,
                                   {abc(Op::LOADBOOL, 0, 1), abx(Op::EXPECT, 0, 2), abc(Op::RETUNIT)}, {11, 11, 11}));

    Site search;
    search.id = "main#0";
    search.kind = SiteKind::Capability;
    search.resource = "web.search";
    search.argNames = {"query"};
    search.retry = 1;
    search.timeoutSeconds = 30;
    search.hasFallback = true;
    search.function = 0;
    search.span = {7, 14, 7, 31};
    Site ask;
    ask.id = "main#1";
    ask.kind = SiteKind::Agent;
    ask.resource = "llm";
    ask.agent = "Writer";
    ask.argNames = {"prompt", "context"};
    ask.askType = 4;
    ask.function = 0;
    ask.span = {8, 15, 8, 36};
    m.sites = {search, ask};
    m.agents = {{"Writer", "llm", "Be brief.", 3}};
    m.tests = {{"adds", "fixtures.json", 2, {11, 1, 11, 39}}};
    m.entry = 0;
    m.manifestJson = R"({"program":"triage","budget_usd":0.5})";
    return sealed(std::move(m));
}

// for x in xs if total <= x { total = total + x }: a loop with a back-edge, CLAMPK, a fused
// compare-and-branch, CLEAR and a list literal.
Module loopModule() {
    Module m = emptyModule("loops");
    m.constants = {{Constant::Kind::Int, 3, 0, ""}, {Constant::Kind::Str, 0, 0, "total: "}};
    m.functions.push_back(function("main", {}, {}, kNoType, 9,
                                   {
                                       abc(Op::LOADI, 0, 0),        // total = 0
                                       abc(Op::LOADI, 4, 1),        // the list [1, 2]
                                       abc(Op::LOADI, 5, 2),        //
                                       abc(Op::NEWLIST, 1, 4, 2),   // r1 = [1, 2]
                                       abc(Op::LOADI, 2, 0),        // index
                                       abc(Op::LOADI, 3, 2),        // end = len
                                       abx(Op::CLAMPK, 3, 0),       // limit 3
                                       abx(Op::FORPREP, 1, 14),     //
                                       abc(Op::FORITEM, 6, 1),      // x
                                       abc(Op::IFLE, 0, 6),         // if total <= x
                                       abx(Op::JMP, 0, 12),         // else skip the body
                                       abc(Op::ADD, 0, 0, 6),       // total + x
                                       abc(Op::CLEAR, 6, 1),        //
                                       abx(Op::FORLOOP, 1, 8),      //
                                       abx(Op::LOADK, 7, 1),        // "total: {total}"
                                       abc(Op::MOVE, 8, 0),         //
                                       abc(Op::INTERP, 6, 7, 2),    //
                                       abc(Op::RETUNIT),
                                   },
                                   {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 2, 4, 4, 4, 5}));
    m.entry = 0;
    return sealed(std::move(m));
}

// a -> b -> c: the register stack is the deepest chain of frames (see the stack test).
Module chainModule() {
    Module m = emptyModule("chain");
    m.functions.push_back(function("a", {}, {}, kNoType, 4, {abc(Op::CALL, 0, 1, 2), abc(Op::RETUNIT)}, {2, 2}));
    m.functions.push_back(function("b", {}, {}, kNoType, 5, {abc(Op::CALL, 0, 2, 3), abc(Op::RETUNIT)}, {3, 3}));
    m.functions.push_back(function("c", {}, {}, kNoType, 6, {abc(Op::RETUNIT)}, {4}));
    m.entry = 0;
    return sealed(std::move(m));
}

// ---- comparing modules field by field

void checkSameSpan(const Span& a, const Span& b) {
    CHECK(a.line == b.line);
    CHECK(a.col == b.col);
    CHECK(a.endLine == b.endLine);
    CHECK(a.endCol == b.endCol);
}

void checkSame(const Module& a, const Module& b) {
    CHECK(a.programName == b.programName);
    CHECK(a.sourceFile == b.sourceFile);
    CHECK(a.programHash == b.programHash);
    CHECK(a.hostHash == b.hostHash);
    CHECK(a.budgetUsd == b.budgetUsd);
    REQUIRE(a.constants.size() == b.constants.size());
    for (size_t i = 0; i < a.constants.size(); ++i) {
        CHECK(a.constants[i].kind == b.constants[i].kind);
        CHECK(a.constants[i].i == b.constants[i].i);
        CHECK(std::bit_cast<uint64_t>(a.constants[i].f) == std::bit_cast<uint64_t>(b.constants[i].f));
        CHECK(a.constants[i].s == b.constants[i].s);
    }
    CHECK(a.shapes == b.shapes);
    REQUIRE(a.types.size() == b.types.size());
    for (size_t i = 0; i < a.types.size(); ++i) {
        CHECK(a.types[i].kind == b.types[i].kind);
        CHECK(a.types[i].name == b.types[i].name);
        CHECK(a.types[i].options == b.types[i].options);
        CHECK(a.types[i].elem == b.types[i].elem);
        CHECK(a.types[i].max == b.types[i].max);
        CHECK(a.types[i].fields == b.types[i].fields);
    }
    REQUIRE(a.functions.size() == b.functions.size());
    for (size_t i = 0; i < a.functions.size(); ++i) {
        const Function& f = a.functions[i];
        const Function& g = b.functions[i];
        CHECK(f.name == g.name);
        CHECK(f.paramNames == g.paramNames);
        CHECK(f.paramTypes == g.paramTypes);
        CHECK(f.returnType == g.returnType);
        CHECK(f.numRegs == g.numRegs);
        REQUIRE(f.code.size() == g.code.size());
        for (size_t pc = 0; pc < f.code.size(); ++pc) {
            CHECK(f.code[pc].op == g.code[pc].op);
            CHECK(f.code[pc].reserved == g.code[pc].reserved);
            CHECK(f.code[pc].a == g.code[pc].a);
            CHECK(f.code[pc].b == g.code[pc].b);
            CHECK(f.code[pc].c == g.code[pc].c);
        }
        REQUIRE(f.spans.size() == g.spans.size());
        for (size_t pc = 0; pc < f.spans.size(); ++pc) checkSameSpan(f.spans[pc], g.spans[pc]);
    }
    REQUIRE(a.sites.size() == b.sites.size());
    for (size_t i = 0; i < a.sites.size(); ++i) {
        const Site& s = a.sites[i];
        const Site& t = b.sites[i];
        CHECK(s.id == t.id);
        CHECK(s.kind == t.kind);
        CHECK(s.resource == t.resource);
        CHECK(s.agent == t.agent);
        CHECK(s.argNames == t.argNames);
        CHECK(s.retry == t.retry);
        CHECK(s.timeoutSeconds == t.timeoutSeconds);
        CHECK(s.hasFallback == t.hasFallback);
        CHECK(s.askType == t.askType);
        CHECK(s.function == t.function);
        checkSameSpan(s.span, t.span);
    }
    REQUIRE(a.agents.size() == b.agents.size());
    for (size_t i = 0; i < a.agents.size(); ++i) {
        CHECK(a.agents[i].name == b.agents[i].name);
        CHECK(a.agents[i].model == b.agents[i].model);
        CHECK(a.agents[i].system == b.agents[i].system);
        CHECK(a.agents[i].maxCalls == b.agents[i].maxCalls);
    }
    REQUIRE(a.tests.size() == b.tests.size());
    for (size_t i = 0; i < a.tests.size(); ++i) {
        CHECK(a.tests[i].name == b.tests[i].name);
        CHECK(a.tests[i].fixtures == b.tests[i].fixtures);
        CHECK(a.tests[i].function == b.tests[i].function);
        checkSameSpan(a.tests[i].span, b.tests[i].span);
    }
    CHECK(a.entry == b.entry);
    CHECK(a.manifestJson == b.manifestJson);
}

std::unique_ptr<Module> loadOk(std::string_view bytes) {
    RbcLoadResult r = loadRbc(bytes);
    INFO(r.error);
    REQUIRE(r.module);
    CHECK(r.error.empty());
    return std::move(r.module);
}

std::string loadError(std::string_view bytes) {
    RbcLoadResult r = loadRbc(bytes);
    CHECK_FALSE(r.module);
    CHECK_FALSE(r.error.empty());
    CHECK(r.error.find('\n') == std::string::npos);
    return r.error;
}

// ---- editing files: the section table as a list, rebuilt with a fresh checksum

uint32_t getU32(const std::string& bytes, size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
    return v;
}
void putU32(std::string& bytes, size_t at, uint32_t v) {
    for (size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

struct Section {
    uint32_t id;
    std::string body;
};

std::vector<Section> sectionsOf(const std::string& file) {
    std::vector<Section> out;
    uint32_t count = getU32(file, kRbcHeaderSize - 4);
    for (uint32_t i = 0; i < count; ++i) {
        size_t e = kRbcHeaderSize + 12 * i;
        out.push_back({getU32(file, e), file.substr(getU32(file, e + 4), getU32(file, e + 8))});
    }
    return out;
}

// The file with `sections` laid out back to back after the table, resealed.
std::string withSections(const std::string& file, const std::vector<Section>& sections) {
    std::string out = file.substr(0, kRbcHeaderSize);
    putU32(out, kRbcHeaderSize - 4, static_cast<uint32_t>(sections.size()));
    size_t offset = kRbcHeaderSize + 12 * sections.size();
    std::string bodies;
    for (const Section& s : sections) {
        std::string entry(12, '\0');
        putU32(entry, 0, s.id);
        putU32(entry, 4, static_cast<uint32_t>(offset));
        putU32(entry, 8, static_cast<uint32_t>(s.body.size()));
        out += entry;
        offset += s.body.size();
        bodies += s.body;
    }
    out += bodies;
    resealRbc(out);
    return out;
}

// The section with `id` replaced by `body`.
std::string withBody(const std::string& file, uint32_t id, std::string body) {
    std::vector<Section> sections = sectionsOf(file);
    for (Section& s : sections)
        if (s.id == id) s.body = std::move(body);
    return withSections(file, sections);
}

std::string le32(uint32_t v) {
    std::string s(4, '\0');
    putU32(s, 0, v);
    return s;
}

std::string contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos ? part : "<" + part + "> not in: " + text;
}

}  // namespace

// ================================================================ round trip

TEST_CASE("rbc: writeRbc -> loadRbc keeps every field") {
    for (const Module& original : {sampleModule(), minimalModule(), loopModule(), chainModule()}) {
        CAPTURE(original.programName);
        std::string bytes = writeRbc(original);
        auto loaded = loadOk(bytes);
        checkSame(original, *loaded);
        CHECK(writeRbc(*loaded) == bytes);
    }
}

TEST_CASE("rbc: awkward values survive the round trip") {
    Module m = sampleModule();
    m.constants.push_back({Constant::Kind::Float, 0, -0.0, ""});
    m.constants.push_back({Constant::Kind::Float, 0, std::numeric_limits<double>::denorm_min(), ""});
    m.constants.push_back({Constant::Kind::Int, std::numeric_limits<int64_t>::min(), 0, ""});
    m.constants.push_back({Constant::Kind::Str, 0, 0, std::string("nul\0byte \xff\n", 12)});
    m.constants.push_back({Constant::Kind::Str, 0, 0, ""});
    m.budgetUsd.reset();
    m.sites[0].timeoutSeconds.reset();
    m.agents[0].maxCalls.reset();
    m.tests[0].fixtures.reset();
    m.types[2].max.reset();
    m.entry = kNoType;
    m.functions[0].spans[0] = {0xffffffff, 0, 7, 0xfffffffe};
    sealProgramHash(m);
    auto loaded = loadOk(writeRbc(m));
    checkSame(m, *loaded);
}

TEST_CASE("rbc: the sample files are pinned and are the fuzzer's seeds") {
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "rbc";
    const bool update = std::getenv("REMIT_UPDATE_RBC_CORPUS") != nullptr;
    const std::pair<const char*, Module> samples[] = {
        // No .rbc extension: .gitignore ignores build artifacts named *.rbc.
        {"sample", sampleModule()},
        {"minimal", minimalModule()},
        {"loops", loopModule()},
        {"chain", chainModule()},
    };
    for (const auto& sample : samples) {
        const char* name = sample.first;  // not a structured binding: clang 14 cannot capture those
        CAPTURE(name);
        std::string bytes = writeRbc(sample.second);
        if (update) {
            std::filesystem::create_directories(dir);
            std::ofstream(dir / name, std::ios::binary) << bytes;
            continue;
        }
        std::ifstream in(dir / name, std::ios::binary);
        REQUIRE_MESSAGE(in, "missing seed; regenerate with REMIT_UPDATE_RBC_CORPUS=1");
        std::string pinned((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK_MESSAGE(pinned == bytes, "the encoding changed: bump kRbcVersion, then regenerate");
    }
}

TEST_CASE("rbc: the encoding of one instruction and the header layout") {
    std::string bytes = writeRbc(minimalModule());
    CHECK(bytes.substr(0, 8) == std::string("\x89RBC\r\n\x1a\n", 8));
    CHECK(getU32(bytes, 8) == kRbcVersion);
    CHECK(getU32(bytes, 12) == 0);
    CHECK(bytes.substr(24, 64) == programHashOf(minimalModule()));
    CHECK(bytes.substr(88, 64) == kHashB);
    CHECK(getU32(bytes, 152) == 10);
    // The functions section (id 5) of `fn main() {}`: one function, its name, no parameters,
    // return type none, 0 registers, one RETUNIT.
    std::string functions = sectionsOf(bytes)[4].body;
    std::string expected = le32(1) + le32(4) + "main" + le32(0) + le32(0) + le32(kNoType) + le32(0) + le32(1) +
                           std::string{char(Op::RETUNIT), 0, 0, 0, 0, 0, 0, 0};
    CHECK(functions == expected);
}

TEST_CASE("rbc: opcode numbers and builtin ids are part of the format") {
    std::string ops;
    for (const OpInfo& info : kOps) ops += std::string(info.name) + " ";
    CHECK(ops ==
          "LOADK LOADI LOADBOOL LOADUNIT MOVE CLEAR ADD SUB MUL DIV MOD ADDI SUBI MULI MODI ADDF SUBF MULF DIVF NEG "
          "NOT APPEND CONCATTO EQ NE LT LE LTI LEI LTF LEF EQI IN JMP JMPIF JMPIFNOT JMPNEK FORPREP FORLOOP FORITEM "
          "CLAMPK NEWLIST NEWRECORD INTERP INDEX GETFIELD CHECKMAX CALL BUILTIN CALLCAP ASKMODEL RET "
          "RETUNIT PCENTER PCLEAVE ADDLABELS TAINTPC EXPECT IFLT IFLE IFEQ IFNE ADDIMM SUBIMM IFEQIMM IFNEIMM "
          "IFLTIMM IFLEIMM IFGTIMM IFGEIMM ");
    std::string builtins;
    for (const BuiltinInfo& b : kBuiltins) builtins += fmt::format("{}/{} ", b.name, b.argc);
    CHECK(builtins ==
          "len/1 take/2 range/1 str/1 lower/1 upper/1 trim/1 contains/2 startswith/2 endswith/2 replace/3 split/2 "
          "join/2 sum/1 min/2 max/2 min/1 max/1 abs/1 round/1 round/2 int/1 float/1 first/1 unique/1 ");
}

TEST_CASE("rbc: docs/bytecode.md lists every opcode as opcodes.def defines it") {
    std::ifstream in(std::filesystem::path(REMIT_SOURCE_DIR) / "docs" / "bytecode.md");
    REQUIRE(in);
    std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    static constexpr const char* kKinds[] = {"-",     "Reg",   "Dst",    "Win",   "Imm",     "KBx", "KStr",
                                             "KIntBx", "KStrBx", "JumpBx", "Skip", "Fn", "Shape", "Builtin", "Site",
                                             "Branch"};
    static constexpr const char* kWindows[] = {"-",           "C", "fields of shape C", "params of fn B",
                                               "args of builtin C", "args of site C", "3"};
    std::string table;
    for (size_t i = 0; i < kOpCount; ++i) {
        const OpInfo& o = kOps[i];
        std::string effect = o.effect;
        for (size_t p = effect.find('|'); p != std::string::npos; p = effect.find('|', p + 2)) effect.replace(p, 1, "\\|");
        std::string window = static_cast<Op>(i) == Op::CLEAR ? "B" : kWindows[size_t(o.window)];
        table += fmt::format("| {} | `{}` | {} | {} | {} | {} | {} |\n", i, o.name, kKinds[size_t(o.a)],
                             kKinds[size_t(o.b)], kKinds[size_t(o.c)], window, effect);
    }
    CHECK_MESSAGE(doc.find(table) != std::string::npos, "docs/bytecode.md's opcode table should read:\n" << table);
}

// ================================================================ loader failures

TEST_CASE("rbc: the header is checked") {
    const std::string good = writeRbc(sampleModule());
    CHECK(contains(loadError(""), "truncated") == "truncated");
    CHECK(contains(loadError(good.substr(0, 5)), "truncated") == "truncated");
    CHECK(contains(loadError("#!/bin/sh\necho hi\n"), "not a .rbc file") == "not a .rbc file");

    std::string bad = good;
    bad[1] = 'X';
    CHECK(contains(loadError(bad), "not a .rbc file") == "not a .rbc file");

    bad = good;
    putU32(bad, 8, 2);  // the version whose header hash was not checked against the content
    CHECK(contains(loadError(bad), "unsupported .rbc version 2 (this build reads version 4") ==
          "unsupported .rbc version 2 (this build reads version 4");
    putU32(bad, 8, 3);  // the version before the immediate operands
    CHECK(contains(loadError(bad), "unsupported .rbc version 3") == "unsupported .rbc version 3");
    putU32(bad, 8, 5);
    CHECK(contains(loadError(bad), "unsupported .rbc version 5") == "unsupported .rbc version 5");

    bad = good;
    bad[good.size() - 3] ^= 0x20;  // inside the manifest
    CHECK(contains(loadError(bad), "checksum mismatch") == "checksum mismatch");
    bad = good;
    bad[kRbcChecksumOffset] ^= 1;
    CHECK(contains(loadError(bad), "checksum mismatch") == "checksum mismatch");

    bad = good;
    putU32(bad, 12, 4);
    CHECK(contains(loadError(bad), "header flags are 0x4") == "header flags are 0x4");

    bad = good;
    putU32(bad, kRbcHeaderSize - 4, 1000);
    resealRbc(bad);
    CHECK(contains(loadError(bad), "section table has 1000 entries") == "section table has 1000 entries");

    bad = writeRbc(minimalModule());
    REQUIRE(bad.size() < kRbcHeaderSize + 12 * 64);
    putU32(bad, kRbcHeaderSize - 4, 64);
    resealRbc(bad);
    CHECK(contains(loadError(bad), "shorter than its section table") == "shorter than its section table");

    std::string huge(kMaxRbcBytes + 1, '\0');
    std::copy(good.begin(), good.begin() + 8, huge.begin());
    CHECK(contains(loadError(huge), "over the limit") == "over the limit");
}

TEST_CASE("rbc: truncation at every byte fails cleanly, with or without a fresh checksum") {
    for (const Module& m : {sampleModule(), minimalModule()}) {
        const std::string good = writeRbc(m);
        for (size_t n = 0; n < good.size(); ++n) {
            CAPTURE(n);
            std::string cut = good.substr(0, n);
            loadError(cut);
            resealRbc(cut);
            loadError(cut);
        }
    }
}

TEST_CASE("rbc: the section table is checked") {
    const std::string good = writeRbc(sampleModule());
    const std::vector<Section> sections = sectionsOf(good);
    REQUIRE(sections.size() == 10);
    REQUIRE(loadRbc(withSections(good, sections)).module);

    auto without = [&](uint32_t id) {
        std::vector<Section> s;
        for (const Section& x : sections)
            if (x.id != id) s.push_back(x);
        return s;
    };
    CHECK(contains(loadError(withSections(good, without(8))), "section 'agents' is missing") ==
          "section 'agents' is missing");

    std::vector<Section> s = sections;
    s.insert(s.begin() + 3, sections[2]);
    CHECK(contains(loadError(withSections(good, s)), "section 'shapes' appears twice") ==
          "section 'shapes' appears twice");

    s = sections;
    s.push_back({11, ""});
    CHECK(contains(loadError(withSections(good, s)), "unknown section id 11") == "unknown section id 11");
    s = sections;
    s[0].id = 0;
    CHECK(contains(loadError(withSections(good, s)), "unknown section id 0") == "unknown section id 0");

    s = sections;
    std::swap(s[1], s[2]);
    CHECK(contains(loadError(withSections(good, s)), "sections must be in id order") ==
          "sections must be in id order");

    // Offsets edited in place: overlap, gap, past the end, trailing bytes.
    size_t entry2 = kRbcHeaderSize + 12 * 2;  // shapes
    std::string bad = good;
    putU32(bad, entry2 + 4, getU32(bad, entry2 + 4) - 1);
    resealRbc(bad);
    CHECK(contains(loadError(bad), "overlapping") == "overlapping");
    bad = good;
    putU32(bad, entry2 + 4, getU32(bad, entry2 + 4) + 1);
    resealRbc(bad);
    CHECK(contains(loadError(bad), "leaving a gap") == "leaving a gap");
    bad = good;
    putU32(bad, entry2 + 8, 0xfffffff0u);
    resealRbc(bad);
    CHECK(contains(loadError(bad), "ends past the end of the file") == "ends past the end of the file");
    bad = good + "junk";
    resealRbc(bad);
    CHECK(contains(loadError(bad), "4 bytes of trailing data") == "4 bytes of trailing data");
}

TEST_CASE("rbc: section contents are bounds-checked before anything is allocated") {
    const std::string good = writeRbc(sampleModule());
    // A string longer than its section (the program name, in the meta section).
    CHECK(contains(loadError(withBody(good, 1, le32(1000) + "triage")), "program name is 1000 bytes long but 6 are left") ==
          "program name is 1000 bytes long but 6 are left");
    CHECK(contains(loadError(withBody(good, 1, le32(0xffffffff))), "over the limit 16777216") ==
          "over the limit 16777216");
    // Counts: over the cap, and more elements than the bytes left could hold.
    CHECK(contains(loadError(withBody(good, 5, le32(0x7fffffff))), "function count 2147483647 is over the limit") ==
          "function count 2147483647 is over the limit");
    CHECK(contains(loadError(withBody(good, 2, le32(1000000))), "constant count 1000000 needs at least 5000000 bytes") ==
          "constant count 1000000 needs at least 5000000 bytes");
    CHECK(contains(loadError(withBody(good, 4, le32(3) + std::string(10, '\0'))), "type count 3 needs") ==
          "type count 3 needs");
    // A field cut short, a bad flag byte, an unknown constant kind, bytes left over.
    CHECK(contains(loadError(withBody(good, 1, le32(0) + le32(0) + std::string(1, '\0') + "\x01\x02")),
                   "entry needs 4 bytes but 2 are left") == "entry needs 4 bytes but 2 are left");
    CHECK(contains(loadError(withBody(good, 1, le32(0) + le32(0) + std::string(1, '\x02') + le32(0))),
                   "budget is 2, not 0 or 1") == "budget is 2, not 0 or 1");
    CHECK(contains(loadError(withBody(good, 2, le32(1) + std::string(1, '\x07') + le32(0))),
                   "section 'constants', constant 0: unknown kind 7") == "section 'constants', constant 0: unknown kind 7");
    CHECK(contains(loadError(withBody(good, 3, le32(0) + "xx")), "section 'shapes': 2 bytes after the section's content") ==
          "section 'shapes': 2 bytes after the section's content");
    // The debug section must describe the same functions as the functions section.
    CHECK(contains(loadError(withBody(good, 6, le32(2))), "spans for 2 functions, but there are 3") ==
          "spans for 2 functions, but there are 3");
}

TEST_CASE("rbc: a flipped byte with a fresh checksum is rejected or re-encodes to itself") {
    // The encoding is canonical, so any accepted corruption must be exactly the writer's bytes
    // for what was loaded; everything else must be a clean one-line error.
    const std::string good = writeRbc(sampleModule());
    size_t rejected = 0, accepted = 0;
    for (size_t i = kRbcChecksumEnd; i < good.size(); ++i) {
        for (unsigned char mask : {0x01, 0x10, 0x80}) {
            std::string bad = good;
            bad[i] = static_cast<char>(bad[i] ^ mask);
            // With the program hash resealed too, the flip reaches the parser and the verifier.
            resealRbcWithProgramHash(bad);
            RbcLoadResult r = loadRbc(bad);
            CAPTURE(i);
            if (r.module) {
                ++accepted;
                CHECK(writeRbc(*r.module) == bad);
            } else {
                ++rejected;
                CHECK(r.error.find('\n') == std::string::npos);
            }
        }
    }
    CHECK(rejected > accepted);
}

TEST_CASE("rbc: corrupted instructions are caught by the verifier") {
    const std::string good = writeRbc(sampleModule());
    // helper's ADDI r1, r0, r1 as stored: op, reserved, a, b, c.
    const std::string addi{char(Op::ADDI), 0, 1, 0, 0, 0, 1, 0};
    size_t at = good.find(addi);
    REQUIRE(at != std::string::npos);
    REQUIRE(good.find(addi, at + 1) == std::string::npos);

    std::string bad = good;
    bad[at] = char(0xee);
    resealRbc(bad);
    CHECK(loadError(bad) == "function 'helper' instruction 1: unknown opcode 238");

    bad = good;
    bad[at + 6] = 9;  // C = r9
    resealRbc(bad);
    CHECK(loadError(bad) == "function 'helper' instruction 1: operand C: register 9 is outside the frame (2 registers)");

    bad = good;
    bad[at] = char(Op::JMP);
    bad[at + 2] = 0;
    bad[at + 4] = char(0x84);
    bad[at + 5] = 3;  // ->900
    bad[at + 6] = 0;
    resealRbc(bad);
    CHECK(loadError(bad) == "function 'helper' instruction 1: jump target 900 is outside the function (3 instructions)");
}

// ================================================================ verifier rules

namespace {

struct Rule {
    Rule(const char* what_, std::function<void(Module&)> breakIt_, std::string error_, std::string fileError_ = {})
        : what(what_), breakIt(std::move(breakIt_)), error(std::move(error_)), fileError(std::move(fileError_)) {}
    const char* what;
    std::function<void(Module&)> breakIt;
    std::string error;      // the whole message
    std::string fileError;  // the start of loadRbc's message, when the parser already refuses the file
};

std::vector<Rule> verifierRules() {
    auto mainCode = [](Module& m) -> std::vector<Instr>& { return m.functions[0].code; };
    return {
        // ---- header, constants, shapes
        {"program hash", [](Module& m) { m.programHash = std::string(64, 'A'); },
         "program hash: not 64 lowercase hex digits"},
        {"host hash", [](Module& m) { m.hostHash = "abc"; }, "host hash: not 64 lowercase hex digits"},
        {"budget", [](Module& m) { m.budgetUsd = -1; }, "budget: -1 is not a finite amount of at least 0"},
        {"entry", [](Module& m) { m.entry = 3; }, "entry: function 3 does not exist (3 functions)"},
        {"manifest not JSON", [](Module& m) { m.manifestJson = "{\"a\":"; }, "manifest: not a JSON object"},
        {"manifest not an object", [](Module& m) { m.manifestJson = "[1]"; }, "manifest: not a JSON object"},
        {"manifest empty", [](Module& m) { m.manifestJson.clear(); }, "manifest: not a JSON object"},
        // Valid JSON, but `remitc manifest` would overflow the stack printing it.
        {"manifest nesting",
         [](Module& m) { m.manifestJson = "{\"a\":" + std::string(200'000, '[') + std::string(200'000, ']') + "}"; },
         "manifest: nested deeper than 256 levels"},
        {"float constant", [](Module& m) { m.constants[1].f = std::numeric_limits<double>::infinity(); },
         "constant 1: Float inf is not finite"},
        {"constant kind", [](Module& m) { m.constants[1].kind = static_cast<Constant::Kind>(9); },
         "constant 1: unknown kind 9", "section 'constants', constant 1: unknown kind 9"},
        {"shape fields", [](Module& m) { m.shapes[0][1] = "a"; }, "shape 0: field 'a' appears twice"},

        // ---- types
        {"type kind", [](Module& m) { m.types[0].kind = static_cast<TypeKind>(40); }, "type 0: unknown kind 40"},
        {"list refers forward", [](Module& m) { m.types[2].elem = 2; },
         "type 2 (List): element type 2 is not an earlier entry"},
        {"record refers forward", [](Module& m) { m.types[3].fields[0].second = 4; },
         "type 3 (Record): field 'url' has type 4, not an earlier entry"},
        {"record fields distinct", [](Module& m) { m.types[3].fields[1].first = "url"; },
         "type 3 (Record): field 'url' appears twice"},
        {"enum empty", [](Module& m) { m.types[4].options.clear(); }, "type 4 (Enum): has no options"},
        {"enum distinct", [](Module& m) { m.types[4].options = {"x", "x"}; }, "type 4 (Enum): option 'x' appears twice"},
        {"options on Int", [](Module& m) { m.types[0].options = {"x"}; }, "type 0 (Int): has enum options"},
        {"fields on a List", [](Module& m) { m.types[2].fields = {{"x", 0}}; }, "type 2 (List): has record fields"},
        {"bound on a Record", [](Module& m) { m.types[3].max = 3; }, "type 3 (Record): has a list element type or bound"},
        {"negative bound", [](Module& m) { m.types[2].max = -1; }, "type 2 (List): negative bound -1"},
        {"depth",
         [](Module& m) {
             for (uint32_t i = 0; i <= kMaxTypeDepth; ++i) {
                 TypeEntry t;
                 t.kind = TypeKind::List;
                 t.elem = static_cast<uint32_t>(m.types.size() - 1);
                 m.types.push_back(t);
             }
         },
         "type 133 (List): nested 129 levels deep (the limit is 128)"},

        // ---- functions
        {"function names", [](Module& m) { m.functions[1].name = "main"; }, "function 'main' is defined twice"},
        {"too many registers", [](Module& m) { m.functions[1].numRegs = kMaxRegisters + 1; },
         "function 'helper': 65536 registers (the limit is 65535)"},
        {"registers for parameters", [](Module& m) { m.functions[0].numRegs = 0; },
         "function 'main': 0 registers cannot hold its 1 parameters"},
        {"parameter types", [](Module& m) { m.functions[0].paramTypes.push_back(0); },
         "function 'main': 1 parameter names but 2 parameter types"},
        {"parameter type exists", [](Module& m) { m.functions[0].paramTypes[0] = kNoType; },
         "function 'main': parameter 'topic' has type 4294967295, which does not exist (5 types)"},
        {"return type exists", [](Module& m) { m.functions[1].returnType = 5; },
         "function 'helper': return type 5 does not exist (5 types)"},
        {"code",
         [](Module& m) {
             m.functions[2].code.clear();
             m.functions[2].spans.clear();
         },
         "function 'test:adds': has no code"},
        {"spans", [](Module& m) { m.functions[1].spans.pop_back(); },
         "function 'helper': 2 debug spans for 3 instructions"},
        {"no fall off the end",
         [](Module& m) {
             m.functions[1].code.push_back(abc(Op::LOADUNIT, 0));
             m.functions[1].spans.push_back({});
         },
         "function 'helper': the last instruction is not RET, RETUNIT or JMP (execution would run off the end)"},

        // ---- agents, sites, tests
        {"agent names", [](Module& m) { m.agents.push_back(m.agents[0]); }, "agent 'Writer' is declared twice"},
        {"agent max_calls", [](Module& m) { m.agents[0].maxCalls = -2; }, "agent 'Writer': negative max_calls -2"},
        {"site ids", [](Module& m) { m.sites[1].id = "main#0"; }, "site 'main#0' appears twice"},
        {"site kind", [](Module& m) { m.sites[0].kind = static_cast<SiteKind>(7); }, "site 0 'main#0': unknown kind 7"},
        {"site function exists", [](Module& m) { m.sites[0].function = 9; },
         "site 0 'main#0': function 9 does not exist (3 functions)"},
        {"model arguments", [](Module& m) { m.sites[1].argNames = {"prompt"}; },
         "site 1 'main#1': a model call takes 2 arguments (prompt, context), not 1"},
        {"agent exists", [](Module& m) { m.sites[1].agent = "Reader"; }, "site 1 'main#1': agent 'Reader' is not declared"},
        {"ask type", [](Module& m) { m.sites[1].askType = 5; }, "site 1 'main#1': output type 5 does not exist (5 types)"},
        {"timeout", [](Module& m) { m.sites[0].timeoutSeconds = std::numeric_limits<double>::quiet_NaN(); },
         "site 0 'main#0': timeout nan is not a finite number of seconds"},
        {"test names", [](Module& m) { m.tests.push_back(m.tests[0]); }, "test 'adds' is defined twice"},
        {"test function exists", [](Module& m) { m.tests[0].function = 3; },
         "test 'adds': function 3 does not exist (3 functions)"},
        {"test takes nothing", [](Module& m) { m.tests[0].function = 1; },
         "test 'adds': function 'helper' takes parameters; a test's takes none"},

        // ---- instructions: opcode, reserved byte, unused operands
        {"opcode", [=](Module& m) { mainCode(m)[0].op = static_cast<Op>(kOpCount); },
         fmt::format("function 'main' instruction 0: unknown opcode {}", kOpCount)},
        {"reserved", [=](Module& m) { mainCode(m)[0].reserved = 1; },
         "function 'main' instruction 0: reserved byte is 1, not 0"},
        {"unused operand", [](Module& m) { m.functions[2].code[2].a = 1; },
         "function 'test:adds' instruction 2: operand A is unused but holds 1"},
        {"unused operand C", [=](Module& m) { mainCode(m)[1].c = 2; },
         "function 'main' instruction 1: operand C is unused but holds 2"},

        // ---- registers and windows
        {"Reg", [](Module& m) { m.functions[1].code[1].c = 2; },
         "function 'helper' instruction 1: operand C: register 2 is outside the frame (2 registers)"},
        {"Dst", [=](Module& m) { mainCode(m)[0].a = 8; },
         "function 'main' instruction 0: operand A: register 8 is outside the frame (8 registers)"},
        {"window of a shape", [=](Module& m) { mainCode(m)[4].b = 7; },
         "function 'main' instruction 4: operand B: window r7..r8 is outside the frame (8 registers)"},
        {"window of a count", [=](Module& m) { mainCode(m)[7].c = 2; },
         "function 'main' instruction 7: operand B: window r7..r8 is outside the frame (8 registers)"},
        {"window of a callee", [=](Module& m) { mainCode(m)[2].c = 8; },
         "function 'main' instruction 2: operand C: window r8..r8 is outside the frame (8 registers)"},
        {"window of a builtin",
         [=](Module& m) { mainCode(m)[3] = abc(Op::BUILTIN, 4, 6, uint16_t(BuiltinId::Replace)); },
         "function 'main' instruction 3: operand B: window r6..r8 is outside the frame (8 registers)"},
        {"window of a site", [=](Module& m) { mainCode(m)[8].b = 7; },
         "function 'main' instruction 8: operand B: window r7..r8 is outside the frame (8 registers)"},
        {"window of a loop", [=](Module& m) { mainCode(m)[7] = abc(Op::FORITEM, 0, 6); },
         "function 'main' instruction 7: operand B: window r6..r8 is outside the frame (8 registers)"},
        {"window of CLEAR", [=](Module& m) { mainCode(m)[7] = abc(Op::CLEAR, 6, 3); },
         "function 'main' instruction 7: operand A: window r6..r8 is outside the frame (8 registers)"},

        // ---- constants, jumps, tables
        {"constant exists", [=](Module& m) { mainCode(m)[0] = abx(Op::LOADK, 1, 4); },
         "function 'main' instruction 0: operand B: constant 4 does not exist (4 constants)"},
        {"KStr", [=](Module& m) { mainCode(m)[7] = abc(Op::JMPNEK, 6, 0, 1); },
         "function 'main' instruction 7: operand B: constant 0 is not a Str"},
        {"Skip", [=](Module& m) { mainCode(m)[7] = abc(Op::JMPNEK, 6, 2, 2); },
         "function 'main' instruction 7: operand C: skipping 2 instructions leaves the function (10 instructions)"},
        {"KIntBx", [=](Module& m) { mainCode(m)[7] = abx(Op::CLAMPK, 6, 2); },
         "function 'main' instruction 7: operand B: constant 2 is not an Int"},
        {"KStrBx", [](Module& m) { m.functions[2].code[1] = abx(Op::EXPECT, 0, 3); },
         "function 'test:adds' instruction 1: operand B: constant 3 is not a Str"},
        {"jump target", [=](Module& m) { mainCode(m)[6] = abx(Op::JMP, 0, 900); },
         "function 'main' instruction 6: jump target 900 is outside the function (10 instructions)"},
        {"jump backward", [=](Module& m) { mainCode(m)[6] = abx(Op::JMP, 0, 6); },
         "function 'main' instruction 6: JMP jumps backward to 6; only FORLOOP may"},
        {"conditional jump backward", [=](Module& m) { mainCode(m)[7] = abx(Op::JMPIFNOT, 1, 2); },
         "function 'main' instruction 7: JMPIFNOT jumps backward to 2; only FORLOOP may"},
        {"function exists", [=](Module& m) { mainCode(m)[2].b = 3; },
         "function 'main' instruction 2: operand B: function 3 does not exist (3 functions)"},
        {"shape exists", [=](Module& m) { mainCode(m)[4].c = 1; },
         "function 'main' instruction 4: operand C: shape 1 does not exist (1 shapes)"},
        {"builtin exists", [=](Module& m) { mainCode(m)[3].c = kBuiltinCount; },
         fmt::format("function 'main' instruction 3: operand C: builtin {0} does not exist ({0} builtins)",
                     kBuiltinCount)},
        {"site exists", [=](Module& m) { mainCode(m)[5].c = 2; },
         "function 'main' instruction 5: operand C: site 2 does not exist (2 sites)"},

        // ---- fused compare-and-branch: the JMP it takes must follow it, and is checked as any JMP
        {"compare-and-branch without its JMP", [=](Module& m) { mainCode(m)[7] = abc(Op::IFLT, 1, 2); },
         "function 'main' instruction 7: IFLT must be followed by a JMP"},
        {"compare-and-branch before a conditional jump",
         [=](Module& m) {
             mainCode(m)[5] = abc(Op::IFLE, 1, 2);
             mainCode(m)[6] = abx(Op::JMPIFNOT, 1, 8);
         },
         "function 'main' instruction 5: IFLE must be followed by a JMP"},
        {"compare-and-branch operand C", [=](Module& m) { mainCode(m)[5] = abc(Op::IFNE, 1, 2, 1); },
         "function 'main' instruction 5: operand C is unused but holds 1"},
        {"compare-and-branch backward",
         [=](Module& m) {
             mainCode(m)[5] = abc(Op::IFEQ, 1, 2);
             mainCode(m)[6] = abx(Op::JMP, 0, 1);
         },
         "function 'main' instruction 6: JMP jumps backward to 1; only FORLOOP may"},
        {"compare-and-branch register", [=](Module& m) { mainCode(m)[5] = abc(Op::IFLT, 1, 8); },
         "function 'main' instruction 5: operand B: register 8 is outside the frame (8 registers)"},

        // ---- immediate operands (format version 4): checked by the same operand kinds
        {"immediate compare-and-branch without its JMP", [=](Module& m) { mainCode(m)[7] = abc(Op::IFEQIMM, 1, 0); },
         "function 'main' instruction 7: IFEQIMM must be followed by a JMP"},
        {"immediate compare-and-branch register", [=](Module& m) { mainCode(m)[5] = abc(Op::IFGEIMM, 8, 65535); },
         "function 'main' instruction 5: operand A: register 8 is outside the frame (8 registers)"},
        {"immediate compare-and-branch operand C", [=](Module& m) { mainCode(m)[5] = abc(Op::IFLEIMM, 1, 2, 1); },
         "function 'main' instruction 5: operand C is unused but holds 1"},
        {"immediate compare-and-branch backward",
         [=](Module& m) {
             mainCode(m)[5] = abc(Op::IFLTIMM, 1, 7);
             mainCode(m)[6] = abx(Op::JMP, 0, 1);
         },
         "function 'main' instruction 6: JMP jumps backward to 1; only FORLOOP may"},
        {"ADDIMM destination", [=](Module& m) { mainCode(m)[1] = abc(Op::ADDIMM, 8, 1, 1); },
         "function 'main' instruction 1: operand A: register 8 is outside the frame (8 registers)"},
        {"SUBIMM source", [=](Module& m) { mainCode(m)[1] = abc(Op::SUBIMM, 3, 9, 1); },
         "function 'main' instruction 1: operand B: register 9 is outside the frame (8 registers)"},

        // ---- host calls
        {"CALLCAP on a model site",
         [=](Module& m) {
             mainCode(m)[5] = abc(Op::CALLCAP, 6, 0, 1);
             mainCode(m)[8] = abc(Op::ASKMODEL, 7, 0, 0);
         },
         "function 'main' instruction 5: CALLCAP uses site 1 'main#1', which is not a capability call"},
        {"ASKMODEL on a capability site",
         [=](Module& m) {
             mainCode(m)[8] = abc(Op::ASKMODEL, 7, 0, 0);
             m.sites[0].argNames = {"prompt", "context"};
         },
         "function 'main' instruction 8: ASKMODEL uses site 0 'main#0', which is a capability call"},
        {"fallback JMP", [=](Module& m) { mainCode(m)[6] = abc(Op::LOADUNIT, 7); },
         "function 'main' instruction 5: site 0 'main#0' has a fallback, but the next instruction is not a JMP"},
        {"site in its function", [](Module& m) { m.sites[1].function = 1; },
         "function 'main' instruction 8: site 1 'main#1' belongs to function 'helper', not this one"},

        // ---- calls
        {"recursion through another function",
         [](Module& m) {
             m.functions[1].code.insert(m.functions[1].code.begin(), abc(Op::CALL, 1, 0, 1));
             m.functions[1].spans.push_back({});
         },
         "calls form a cycle: 'main' -> 'helper' -> 'main' (Remit has no recursion)"},
        {"direct recursion",
         [](Module& m) {
             m.functions[1].code[0] = abc(Op::CALL, 1, 1, 0);
         },
         "calls form a cycle: 'helper' -> 'helper' (Remit has no recursion)"},
    };
}

}  // namespace

TEST_CASE("verifier: the sample modules pass") {
    for (Module m : {sampleModule(), minimalModule(), loopModule(), chainModule()}) {
        CAPTURE(m.programName);
        CHECK(verifyModule(m) == "");
    }
}

TEST_CASE("verifier: every rule rejects its violation, in memory and through a file") {
    for (const Rule& rule : verifierRules()) {
        CAPTURE(rule.what);
        Module m = sampleModule();
        rule.breakIt(m);
        CHECK(verifyModule(m) == rule.error);
        // Through the file format: the same message (the encoding keeps the broken field).
        RbcLoadResult r = loadRbc(writeRbc(m));
        CHECK_FALSE(r.module);
        if (rule.fileError.empty()) CHECK(r.error == rule.error);
        else CHECK(r.error.rfind(rule.fileError, 0) == 0);
    }
}

TEST_CASE("verifier: names in messages are escaped and cut") {
    Module m = sampleModule();
    m.functions[1].name = "evil\nname'" + std::string(100, 'x');
    m.functions[1].numRegs = 0;
    std::string error = verifyModule(m);
    CHECK(error.find('\n') == std::string::npos);
    CHECK(error.rfind("function 'evil\\x0aname\\'xxx", 0) == 0);
    CHECK(error.find("x...':") != std::string::npos);
    // A cut never splits a UTF-8 sequence.
    CHECK(quoteName(std::string(79, 'x') + "\xc3\xa9") == "'" + std::string(79, 'x') + "...'");
    CHECK(quoteName(std::string(78, 'x') + "\xc3\xa9!") == "'" + std::string(78, 'x') + "\xc3\xa9...'");
    CHECK(utf8Prefix("ab\xe2\x82\xac", 4) == "ab");
    CHECK(utf8Prefix("ab\xe2\x82\xac", 5) == "ab\xe2\x82\xac");
}

TEST_CASE("verifier: the register stack is the deepest chain of frames") {
    // a (4 registers) calls b with its frame at r2; b (5) calls c at r3; c needs 6.
    // c: 6; b: max(5, 3 + 6) = 9; a: max(4, 2 + 9) = 11.
    Module m = chainModule();
    REQUIRE(verifyModule(m) == "");
    CHECK(m.stackRegisters == 11);
    // A function that calls nothing but has more registers than the chain needs sets the size.
    m.functions.push_back(function("wide", {}, {}, kNoType, 20, {abc(Op::RETUNIT)}, {9}));
    REQUIRE(verifyModule(m) == "");
    CHECK(m.stackRegisters == 20);
    // A diamond (a calls b and c, b calls c) is not a cycle.
    m = chainModule();
    m.functions[0].code.insert(m.functions[0].code.begin(), abc(Op::CALL, 0, 2, 1));
    m.functions[0].spans.push_back({});
    REQUIRE(verifyModule(m) == "");
    CHECK(m.stackRegisters == 11);
    // Loaded modules carry the computed size too.
    CHECK(loadOk(writeRbc(chainModule()))->stackRegisters == 11);
}

TEST_CASE("verifier: long call chains are checked without recursion") {
    // The longest chain CALL's 16-bit operand allows: f0 calls f1 ... calls f65535, each with its
    // callee's frame at r1, so the stack is 65,536 registers.
    constexpr uint32_t kLength = 0x10000;
    Module m = emptyModule("long");
    m.functions.reserve(kLength);
    for (uint32_t i = 0; i < kLength; ++i) {
        std::vector<Instr> code;
        if (i + 1 < kLength) code.push_back(abc(Op::CALL, 0, static_cast<uint16_t>(i + 1), 1));
        code.push_back(abc(Op::RETUNIT));
        m.functions.push_back(function(fmt::format("f{}", i), {}, {}, kNoType, 1, std::move(code), {}));
    }
    REQUIRE(verifyModule(m) == "");
    CHECK(m.stackRegisters == kLength);

    // The last function calls the first: one cycle through all of them, its middle cut.
    m.functions.back().code.insert(m.functions.back().code.begin(), abc(Op::CALL, 0, 0, 1));
    m.functions.back().spans.push_back({});
    CHECK(verifyModule(m) == "calls form a cycle: 'f0' -> 'f1' -> 'f2' -> 'f3' -> ... (65529 more) -> 'f65533' -> "
                             "'f65534' -> 'f65535' -> 'f0' (Remit has no recursion)");
}

TEST_CASE("verifier: the register stack has a limit") {
    // 300 functions of 65,535 registers, each calling the next at r65534: far over 1 << 24.
    Module m = emptyModule("deep");
    for (uint32_t i = 0; i < 300; ++i) {
        std::vector<Instr> code;
        if (i + 1 < 300) code.push_back(abc(Op::CALL, 0, static_cast<uint16_t>(i + 1), 0xfffe));
        code.push_back(abc(Op::RETUNIT));
        m.functions.push_back(function(fmt::format("f{}", i), {}, {}, kNoType, 0xffff, std::move(code), {}));
    }
    std::string error = verifyModule(m);
    CHECK(error.find("its deepest chain of calls needs") != std::string::npos);
    CHECK(error.find("(the limit is 16777216)") != std::string::npos);
}

// ================================================================ types

TEST_CASE("materializeTypes: builds the checker's types index for index") {
    Module m = sampleModule();
    TypeEntry lits;
    lits.kind = TypeKind::Str;
    lits.options = {"b", "a"};
    m.types.push_back(lits);
    REQUIRE(verifyModule(m) == "");
    TypeArena arena;
    std::vector<TypeRef> types = materializeTypes(m, arena);
    REQUIRE(types.size() == m.types.size());
    CHECK(types[0] == arena.integer());
    CHECK(types[1] == arena.str());
    CHECK(showType(types[2]) == "List[Str] max 5");
    CHECK(types[2]->depth == 1);
    CHECK(showType(types[3]) == "Hit");
    REQUIRE(types[3]->fields.size() == 2);
    CHECK(types[3]->fields[0].name == "url");
    CHECK(types[3]->fields[0].type == types[1]);
    CHECK(types[4]->kind == TypeKind::Enum);
    CHECK(types[4]->options == std::vector<std::string>{"low", "high"});
    CHECK(types[5]->options == std::vector<std::string>{"a", "b"});
}

// ================================================================ disassembler

namespace {

const char* const kSampleListing = R"(; Remit bytecode: program 'triage' from 'triage.rmt'
; program hash  '71dc23c2fe7cd51de62a490dbc08528eb9af67754c0f018769521d6bdb33b6a9'
; host hash     '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'
; budget        0.5 USD
; entry         fn 0 'main'
; 3 functions, 4 constants, 1 shape, 5 types, 2 sites, 1 agent, 1 test; manifest 37 bytes; stack 8 registers

constants
  k0    Int   42
  k1    Float 1.5
  k2    Str   "hello"
  k3    Int   -7

shapes
  shape 0 {a, b}

types
  t0    Int
  t1    Str
  t2    List[t1] max 5
  t3    Record 'Hit' {url: t1, n: t0}
  t4    Enum 'Level' "low" | "high"

sites
  site 0 'main#0' capability 'web.search'(query) in fn 0 'main' retry 1 timeout 30.0s fallback at 7:14
  site 1 'main#1' agent 'Writer' model 'llm'(prompt, context) as t4 in fn 0 'main' at 8:15

agents
  agent 'Writer' model 'llm' max_calls 3 system "Be brief."

tests
  test 'adds' fn 2 'test:adds' fixtures "fixtures.json" at 11:1

fn 0 'main'(topic: t1) -> t0; 8 registers, 10 instructions
  0  LOADK     r1, k0 42                    ; 4:3
  1  MOVE      r3, r1                       ; 4:3
  2  CALL      r2, fn 1 'helper', r3        ; 4:3
  3  BUILTIN   r4, r0, builtin 'len'        ; 5:3
  4  NEWRECORD r5, r1, shape 0 {a, b}       ; 6:3
  5  CALLCAP   r6, r0, site 0 'main#0'      ; 7:3
  6  JMP       ->8                          ; 7:3
  7  NEWLIST   r6, r7, 0                    ; 7:3
  8  ASKMODEL  r7, r0, site 1 'main#1'      ; 8:3
  9  RET       r2                           ; 9:3

fn 1 'helper'(x: t0) -> t0; 2 registers, 3 instructions
  0  LOADI     r1, 1                        ; 2:3
  1  ADDI      r1, r0, r1                   ; 2:3
  2  RET       r1                           ; 2:3

fn 2 'test:adds'(); 1 register, 3 instructions
  0  LOADBOOL  r0, 1                        ; 11:3
  1  EXPECT    r0, k2 "hello"               ; 11:3
  2  RETUNIT                                ; 11:3
)";

}  // namespace

TEST_CASE("disasm: the listing of the sample module") {
    Module m = sampleModule();
    REQUIRE(verifyModule(m) == "");
    CHECK(disassemble(m) == kSampleListing);
}

TEST_CASE("disasm: with the source, each line is shown once above its first instruction") {
    Module m = sampleModule();
    REQUIRE(verifyModule(m) == "");
    std::string listing = disassemble(m, kSampleSource);
    CHECK(listing.find("    4 |   let n = helper(42)\n  0  LOADK     r1, k0 42") != std::string::npos);
    CHECK(listing.find("  2  CALL      r2, fn 1 'helper', r3        ; 4:3\n    5 |   let size = len(topic)\n"
                       "  3  BUILTIN") != std::string::npos);
    CHECK(listing.find("    7 |   let hits = web.search(topic) else []\n  5  CALLCAP") != std::string::npos);
    CHECK(listing.find("| fn helper(x: Int) -> Int { x + 1 }\n  0  LOADI") != std::string::npos);
    // Each line appears once per function that has code from it.
    size_t count = 0;
    for (size_t p = listing.find("let hits"); p != std::string::npos; p = listing.find("let hits", p + 1)) ++count;
    CHECK(count == 1);
    // Without source text, or with spans outside it, no source lines at all.
    CHECK(disassemble(m, "one line only\n").find("one line only") == std::string::npos);
}

TEST_CASE("disasm: a loop, and hostile or unverified modules list without crashing") {
    Module loops = loopModule();
    REQUIRE(verifyModule(loops) == "");
    std::string listing = disassemble(loops);
    CHECK(listing.find("  7  FORPREP   r1, ->14") != std::string::npos);
    CHECK(listing.find("  9  IFLE      r0, r6") != std::string::npos);
    CHECK(listing.find(" 10  JMP       ->12") != std::string::npos);
    CHECK(listing.find(" 13  FORLOOP   r1, ->8") != std::string::npos);
    CHECK(listing.find(" 12  CLEAR     r6, 1") != std::string::npos);
    CHECK(listing.find("  6  CLAMPK    r3, k0 3") != std::string::npos);

    Module m = sampleModule();
    m.functions[0].code[0] = abx(Op::LOADK, 1, 99);
    m.functions[0].code[2].b = 77;
    m.functions[0].code[3].c = 999;
    m.functions[0].code[4].c = 5;
    m.functions[0].code[5].c = 9;
    m.functions[0].code[6].op = static_cast<Op>(250);
    m.functions[0].spans.resize(2);
    m.constants[2].s = std::string(100, 'y') + "\n";
    m.functions[1].name = "line\nbreak";
    m.types[0].kind = static_cast<TypeKind>(99);
    m.sites[0].kind = static_cast<SiteKind>(99);
    listing = disassemble(m);
    CHECK(listing.find("LOADK     r1, k99 ?") != std::string::npos);
    CHECK(listing.find("fn 77 ?") != std::string::npos);
    CHECK(listing.find("builtin 999 ?") != std::string::npos);
    CHECK(listing.find("shape 5 ?") != std::string::npos);
    CHECK(listing.find("site 9 ?") != std::string::npos);
    CHECK(listing.find("op250") != std::string::npos);
    CHECK(listing.find("'line\\x0abreak'") != std::string::npos);
    CHECK(listing.find("k2 \"" + std::string(40, 'y') + "\"...") != std::string::npos);
    CHECK(listing.find("\"" + std::string(100, 'y') + "\\n\"") != std::string::npos);
}

// ================================================================ the program hash

TEST_CASE("rbc: the program hash is the content's, and the header must agree") {
    const Module sample = sampleModule();
    const std::string good = writeRbc(sample);
    CHECK(good.substr(24, 64) == programHashOf(sample));

    // Another program's hash in the header (the checksum fixed): refused, naming both.
    const std::string other = programHashOf(minimalModule());
    std::string forged = good;
    std::copy(other.begin(), other.end(), forged.begin() + 24);
    resealRbc(forged);
    CHECK(loadError(forged) == "program hash: the header says " + other + " but the module's content hashes to " +
                                   programHashOf(sample) + " (the file was changed after it was built)");
    // resealRbcWithProgramHash repairs it (the tests' and the fuzzer's tool, not a loader path).
    resealRbcWithProgramHash(forged);
    CHECK(forged == good);

    // What the hash ignores: where things came from.
    Module m = sample;
    m.sourceFile = "elsewhere/triage.rmt";
    for (Function& f : m.functions)
        for (Span& s : f.spans) s = at(s.line + 100, 9);
    for (Site& s : m.sites) s.span = at(77, 1);
    for (TestCase& t : m.tests) t.span = at(88, 1);
    m.manifestJson = "{\"program\": \"reformatted\"}";
    m.hostHash = std::string(64, 'c');
    CHECK(programHashOf(m) == programHashOf(sample));

    // What it covers: every field a run depends on.
    const std::vector<std::pair<const char*, std::function<void(Module&)>>> changes = {
        {"program name", [](Module& x) { x.programName = "triage2"; }},
        {"budget", [](Module& x) { x.budgetUsd = 0.25; }},
        {"entry", [](Module& x) { x.entry = 1; }},
        {"a constant", [](Module& x) { x.constants[0].i = 43; }},
        {"a shape", [](Module& x) { x.shapes[0][1] = "c"; }},
        {"a type name", [](Module& x) { x.types[3].name = "Hat"; }},
        {"an instruction", [](Module& x) { x.functions[1].code[0].b = 2; }},
        {"a register count", [](Module& x) { x.functions[1].numRegs = 3; }},
        {"a site's retry", [](Module& x) { x.sites[0].retry = 2; }},
        {"a site's resource", [](Module& x) { x.sites[0].resource = "web.fetch"; }},
        {"an agent's prompt", [](Module& x) { x.agents[0].system = "Be long."; }},
        {"a test's fixtures", [](Module& x) { x.tests[0].fixtures = "other.json"; }},
    };
    for (const auto& change : changes) {
        CAPTURE(change.first);
        Module changed = sample;
        change.second(changed);
        CHECK(programHashOf(changed) != programHashOf(sample));
    }
}

// ================================================================ running what loads

TEST_CASE("vm: every entry of a loaded module runs under refusal, as the rbc fuzzer runs it") {
    // tests/fuzz/run_module.h is the harness's runner: the samples (the fuzzer's seeds) run main
    // and their test functions with every host call denied, then failing (retries, fallbacks).
    for (const Module& m : {sampleModule(), minimalModule(), loopModule(), chainModule()}) {
        CAPTURE(m.programName);
        RbcLoadResult r = loadRbc(writeRbc(m));
        REQUIRE(r.module);
        auto program = std::make_shared<const LoadedProgram>(std::move(r.module));
        size_t entries = (program->module().entry != kNoType ? 1 : 0) + program->module().tests.size();
        CHECK(fuzz::runEveryEntry(program) == 2 * entries);
    }
    // The sample's main stops at its capability call: denied, the run fails with the denial.
    RbcLoadResult r = loadRbc(writeRbc(sampleModule()));
    REQUIRE(r.module);
    auto program = std::make_shared<const LoadedProgram>(std::move(r.module));
    CHECK(fuzz::runOne(program, program->entry(), fuzz::Refusal::Denied) == RunStatus::Failed);
}
