// The .rbc writer and loader (bytecode/rbc.h); docs/bytecode.md is the byte-level reference.
//
// The loader reads hostile bytes. Every read goes through Reader, which checks the bounds of its
// section first and records the first failure (later reads then return zeros and change nothing);
// every count is checked against the bytes left in its section — each element takes at least
// `minBytes` of them — and against a fixed cap before anything is reserved or allocated. So memory
// use is at most a small multiple of the file's size, and no read can leave the buffer.
//
// Writer and Reader encode the same fields in the same order; each section has one write function
// and one read function next to each other so that they are changed together.
#include "bytecode/rbc.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <iterator>

#include <fmt/format.h>
#include <xxhash.h>

#include "runtime/hash.h"
#include "bytecode/verifier.h"

namespace remit {

namespace {

constexpr size_t kHashBytes = 64;
constexpr size_t kProgramHashOffset = 24;
constexpr size_t kHostHashOffset = kProgramHashOffset + kHashBytes;
constexpr size_t kSectionCountOffset = kHostHashOffset + kHashBytes;
static_assert(kSectionCountOffset + 4 == kRbcHeaderSize);
constexpr size_t kSectionEntryBytes = 12;  // id, offset, size

// Caps on counts the format allows (beyond those of bytecode/verifier.h), so that no count read from a
// file reserves more than a bounded amount.
constexpr uint32_t kMaxConstants = 1u << 24;
constexpr uint32_t kMaxTableEntries = 1u << 20;  // shapes, types, sites, agents, tests, options, fields

// Version 1 has exactly this many sections (kSections below), each required once, in id order.
constexpr uint32_t kSectionCount = 10;
constexpr uint32_t kMaxSections = 64;  // a longer table is rejected before it is read

// ---------------------------------------------------------------- encoding primitives

class Writer {
public:
    std::string out;
    // Writing what the program hash covers rather than the file: the fields that only say where
    // things came from (the source file name, spans) are left out (programHashOf).
    bool forHash = false;

    void u8(uint8_t v) { out += static_cast<char>(v); }
    void u16(uint16_t v) { le(v, 2); }
    void u32(uint32_t v) { le(v, 4); }
    void u64(uint64_t v) { le(v, 8); }
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
    void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
    void flag(bool v) { u8(v ? 1 : 0); }
    void count(size_t n) { u32(static_cast<uint32_t>(n)); }
    void str(std::string_view s) {
        count(s.size());
        out.append(s);
    }
    void optI64(const std::optional<int64_t>& v) {
        flag(v.has_value());
        if (v) i64(*v);
    }
    void optF64(const std::optional<double>& v) {
        flag(v.has_value());
        if (v) f64(*v);
    }
    void optStr(const std::optional<std::string>& v) {
        flag(v.has_value());
        if (v) str(*v);
    }
    void span(const Span& s) {
        u32(s.line);
        u32(s.col);
        u32(s.endLine);
        u32(s.endCol);
    }
    void strs(const std::vector<std::string>& v) {
        count(v.size());
        for (const std::string& s : v) str(s);
    }

private:
    void le(uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
    }
};

uint64_t readLE(const char* p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    return v;
}

// Bounds-checked reads from one section. The first failure is kept (with the element being read
// and the absolute byte offset); after it every read returns a zero value, and callers stop their
// loops on !ok().
class Reader {
public:
    Reader(std::string_view file, size_t begin, size_t size, const char* section)
        : file_(file), pos_(begin), end_(begin + size), section_(section) {}

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    // Names the element being read, for messages: at("function", 3) -> "function 3".
    void at(const char* element, size_t index) {
        element_ = element;
        index_ = index;
    }

    uint8_t u8(const char* what) { return static_cast<uint8_t>(fixed(what, 1)); }
    uint16_t u16(const char* what) { return static_cast<uint16_t>(fixed(what, 2)); }
    uint32_t u32(const char* what) { return static_cast<uint32_t>(fixed(what, 4)); }
    uint64_t u64(const char* what) { return fixed(what, 8); }
    int64_t i64(const char* what) { return static_cast<int64_t>(u64(what)); }
    double f64(const char* what) { return std::bit_cast<double>(u64(what)); }
    bool flag(const char* what) {
        uint8_t v = u8(what);
        if (v > 1) reject(fmt::format("{} is {}, not 0 or 1", what, v));
        return v == 1;
    }
    // A count of elements that take at least `minBytes` each, at most `cap`.
    uint32_t count(const char* what, size_t minBytes, uint32_t cap) {
        uint32_t n = u32(what);
        if (!ok()) return 0;
        if (n > cap) {
            reject(fmt::format("{} {} is over the limit {}", what, n, cap));
            return 0;
        }
        if (n > left() / minBytes) {
            reject(fmt::format("{} {} needs at least {} bytes but {} are left", what, n, uint64_t{n} * minBytes,
                               left()));
            return 0;
        }
        return n;
    }
    std::string str(const char* what) {
        uint32_t n = u32(what);
        if (!ok()) return {};
        if (n > kMaxRbcString) {
            reject(fmt::format("{} is {} bytes long, over the limit {}", what, n, kMaxRbcString));
            return {};
        }
        if (n > left()) {
            reject(fmt::format("{} is {} bytes long but {} are left", what, n, left()));
            return {};
        }
        std::string s(file_.substr(pos_, n));
        pos_ += n;
        return s;
    }
    std::optional<int64_t> optI64(const char* what) {
        if (!flag(what)) return std::nullopt;
        return i64(what);
    }
    std::optional<double> optF64(const char* what) {
        if (!flag(what)) return std::nullopt;
        return f64(what);
    }
    std::optional<std::string> optStr(const char* what) {
        if (!flag(what)) return std::nullopt;
        return str(what);
    }
    Span span(const char* what) {
        Span s;
        s.line = u32(what);
        s.col = u32(what);
        s.endLine = u32(what);
        s.endCol = u32(what);
        return s;
    }
    std::vector<std::string> strs(const char* countWhat, const char* what, uint32_t cap) {
        std::vector<std::string> v(count(countWhat, 4, cap));
        for (size_t i = 0; i < v.size() && ok(); ++i) v[i] = str(what);
        return v;
    }
    // The rest of the section as bytes.
    std::string rest() {
        std::string s(file_.substr(pos_, left()));
        pos_ = end_;
        return s;
    }
    // Every byte of a section belongs to its content.
    void finish() {
        if (ok() && left() != 0) {
            element_ = nullptr;
            reject(fmt::format("{} bytes after the section's content", left()));
        }
    }
    // Records a failure (unless there already is one) at the current element and byte.
    void reject(std::string_view message) {
        if (!ok()) return;
        std::string where = element_ ? fmt::format(", {} {}", element_, index_) : std::string();
        error_ = fmt::format("section '{}'{}: {} (at byte {})", section_, where, message, pos_);
    }

private:
    std::string_view file_;
    size_t pos_, end_;
    const char* section_;
    const char* element_ = nullptr;
    size_t index_ = 0;
    std::string error_;

    size_t left() const { return end_ - pos_; }

    uint64_t fixed(const char* what, int bytes) {
        if (!ok()) return 0;
        if (left() < static_cast<size_t>(bytes)) {
            reject(fmt::format("{} needs {} bytes but {} are left", what, bytes, left()));
            return 0;
        }
        uint64_t v = readLE(file_.data() + pos_, bytes);
        pos_ += static_cast<size_t>(bytes);
        return v;
    }
};

// ---------------------------------------------------------------- sections

void writeMeta(Writer& w, const Module& m) {
    w.str(m.programName);
    if (!w.forHash) w.str(m.sourceFile);
    w.optF64(m.budgetUsd);
    w.u32(m.entry);
}
void readMeta(Reader& r, Module& m) {
    m.programName = r.str("program name");
    m.sourceFile = r.str("source file");
    m.budgetUsd = r.optF64("budget");
    m.entry = r.u32("entry");
}

void writeConstants(Writer& w, const Module& m) {
    w.count(m.constants.size());
    for (const Constant& k : m.constants) {
        w.u8(static_cast<uint8_t>(k.kind));
        switch (k.kind) {
            case Constant::Kind::Int: w.i64(k.i); break;
            case Constant::Kind::Float: w.f64(k.f); break;
            case Constant::Kind::Str: w.str(k.s); break;
        }
    }
}
void readConstants(Reader& r, Module& m) {
    // The smallest constant is a kind byte and an empty string's length.
    m.constants.resize(r.count("constant count", 5, kMaxConstants));
    for (size_t i = 0; i < m.constants.size() && r.ok(); ++i) {
        r.at("constant", i);
        Constant& k = m.constants[i];
        uint8_t kind = r.u8("kind");
        switch (kind) {
            case 0: k.kind = Constant::Kind::Int, k.i = r.i64("Int value"); break;
            case 1: k.kind = Constant::Kind::Float, k.f = r.f64("Float value"); break;
            case 2: k.kind = Constant::Kind::Str, k.s = r.str("Str value"); break;
            default: r.reject(fmt::format("unknown kind {}", kind)); return;
        }
    }
}

void writeShapes(Writer& w, const Module& m) {
    w.count(m.shapes.size());
    for (const auto& shape : m.shapes) w.strs(shape);
}
void readShapes(Reader& r, Module& m) {
    m.shapes.resize(r.count("shape count", 4, kMaxTableEntries));
    for (size_t i = 0; i < m.shapes.size() && r.ok(); ++i) {
        r.at("shape", i);
        m.shapes[i] = r.strs("field count", "field name", kMaxRegisters);
    }
}

// Every type entry carries every field (empty when its kind does not use it): one layout for
// all kinds, and the verifier rejects fields that do not belong to the kind.
void writeTypes(Writer& w, const Module& m) {
    w.count(m.types.size());
    for (const TypeEntry& t : m.types) {
        w.u8(static_cast<uint8_t>(t.kind));
        w.str(t.name);
        w.strs(t.options);
        w.u32(t.elem);
        w.optI64(t.max);
        w.count(t.fields.size());
        for (const auto& [name, type] : t.fields) {
            w.str(name);
            w.u32(type);
        }
    }
}
void readTypes(Reader& r, Module& m) {
    m.types.resize(r.count("type count", 18, kMaxTableEntries));
    for (size_t i = 0; i < m.types.size() && r.ok(); ++i) {
        r.at("type", i);
        TypeEntry& t = m.types[i];
        t.kind = static_cast<TypeKind>(r.u8("kind"));
        t.name = r.str("name");
        t.options = r.strs("option count", "option", kMaxTableEntries);
        t.elem = r.u32("element type");
        t.max = r.optI64("list bound");
        t.fields.resize(r.count("field count", 8, kMaxTableEntries));
        for (size_t f = 0; f < t.fields.size() && r.ok(); ++f) {
            t.fields[f].first = r.str("field name");
            t.fields[f].second = r.u32("field type");
        }
    }
}

void writeFunctions(Writer& w, const Module& m) {
    w.count(m.functions.size());
    for (const Function& f : m.functions) {
        w.str(f.name);
        w.strs(f.paramNames);
        w.count(f.paramTypes.size());
        for (uint32_t t : f.paramTypes) w.u32(t);
        w.u32(f.returnType);
        w.u32(f.numRegs);
        w.count(f.code.size());
        for (const Instr& in : f.code) {
            w.u8(static_cast<uint8_t>(in.op));
            w.u8(in.reserved);
            w.u16(in.a);
            w.u16(in.b);
            w.u16(in.c);
        }
    }
}
void readFunctions(Reader& r, Module& m) {
    m.functions.resize(r.count("function count", 24, kMaxFunctions));
    for (size_t i = 0; i < m.functions.size() && r.ok(); ++i) {
        r.at("function", i);
        Function& f = m.functions[i];
        f.name = r.str("name");
        f.paramNames = r.strs("parameter count", "parameter name", kMaxRegisters);
        f.paramTypes.resize(r.count("parameter type count", 4, kMaxRegisters));
        for (uint32_t& t : f.paramTypes) t = r.u32("parameter type");
        f.returnType = r.u32("return type");
        f.numRegs = r.u32("register count");
        f.code.resize(r.count("instruction count", sizeof(Instr), kMaxInstructions));
        for (size_t pc = 0; pc < f.code.size() && r.ok(); ++pc) {
            Instr& in = f.code[pc];
            // Any byte is stored: the verifier rejects opcodes past the table.
            in.op = static_cast<Op>(r.u8("opcode"));
            in.reserved = r.u8("reserved byte");
            in.a = r.u16("operand A");
            in.b = r.u16("operand B");
            in.c = r.u16("operand C");
        }
    }
}

// One list of spans per function, in function order (the verifier matches them to the code).
void writeDebug(Writer& w, const Module& m) {
    w.count(m.functions.size());
    for (const Function& f : m.functions) {
        w.count(f.spans.size());
        for (const Span& s : f.spans) w.span(s);
    }
}
void readDebug(Reader& r, Module& m) {
    uint32_t n = r.u32("function count");
    if (r.ok() && n != m.functions.size()) {
        r.reject(fmt::format("spans for {} functions, but there are {}", n, m.functions.size()));
        return;
    }
    for (size_t i = 0; i < m.functions.size() && r.ok(); ++i) {
        r.at("function", i);
        std::vector<Span>& spans = m.functions[i].spans;
        spans.resize(r.count("span count", 16, kMaxInstructions));
        for (Span& s : spans) s = r.span("span");
    }
}

void writeSites(Writer& w, const Module& m) {
    w.count(m.sites.size());
    for (const Site& s : m.sites) {
        w.str(s.id);
        w.u8(static_cast<uint8_t>(s.kind));
        w.str(s.resource);
        w.str(s.agent);
        w.strs(s.argNames);
        w.u32(s.retry);
        w.optF64(s.timeoutSeconds);
        w.flag(s.hasFallback);
        w.u32(s.askType);
        w.u32(s.function);
        if (!w.forHash) w.span(s.span);
    }
}
void readSites(Reader& r, Module& m) {
    m.sites.resize(r.count("site count", 47, kMaxTableEntries));
    for (size_t i = 0; i < m.sites.size() && r.ok(); ++i) {
        r.at("site", i);
        Site& s = m.sites[i];
        s.id = r.str("id");
        s.kind = static_cast<SiteKind>(r.u8("kind"));
        s.resource = r.str("resource");
        s.agent = r.str("agent");
        s.argNames = r.strs("argument count", "argument name", kMaxRegisters);
        s.retry = r.u32("retry");
        s.timeoutSeconds = r.optF64("timeout");
        s.hasFallback = r.flag("fallback flag");
        s.askType = r.u32("output type");
        s.function = r.u32("function");
        s.span = r.span("span");
    }
}

void writeAgents(Writer& w, const Module& m) {
    w.count(m.agents.size());
    for (const Agent& a : m.agents) {
        w.str(a.name);
        w.str(a.model);
        w.str(a.system);
        w.optI64(a.maxCalls);
    }
}
void readAgents(Reader& r, Module& m) {
    m.agents.resize(r.count("agent count", 13, kMaxTableEntries));
    for (size_t i = 0; i < m.agents.size() && r.ok(); ++i) {
        r.at("agent", i);
        Agent& a = m.agents[i];
        a.name = r.str("name");
        a.model = r.str("model");
        a.system = r.str("system prompt");
        a.maxCalls = r.optI64("max_calls");
    }
}

void writeTests(Writer& w, const Module& m) {
    w.count(m.tests.size());
    for (const TestCase& t : m.tests) {
        w.str(t.name);
        w.optStr(t.fixtures);
        w.u32(t.function);
        if (!w.forHash) w.span(t.span);
    }
}
void readTests(Reader& r, Module& m) {
    m.tests.resize(r.count("test count", 25, kMaxTableEntries));
    for (size_t i = 0; i < m.tests.size() && r.ok(); ++i) {
        r.at("test", i);
        TestCase& t = m.tests[i];
        t.name = r.str("name");
        t.fixtures = r.optStr("fixtures");
        t.function = r.u32("function");
        t.span = r.span("span");
    }
}

// The manifest is the section's bytes, with no length prefix of its own.
void writeManifest(Writer& w, const Module& m) { w.out += m.manifestJson; }
void readManifest(Reader& r, Module& m) { m.manifestJson = r.rest(); }

// The sections (the same ten since version 1), indexed by id - 1. Reading in id order means the debug section sees
// the functions.
struct SectionSpec {
    const char* name;
    void (*write)(Writer&, const Module&);
    void (*read)(Reader&, Module&);
    bool hashed;  // part of what the program hash covers (docs/bytecode.md, "The program hash")
};
constexpr SectionSpec kSections[] = {
    {"meta", writeMeta, readMeta, true},
    {"constants", writeConstants, readConstants, true},
    {"shapes", writeShapes, readShapes, true},
    {"types", writeTypes, readTypes, true},
    {"functions", writeFunctions, readFunctions, true},
    {"debug", writeDebug, readDebug, false},
    {"sites", writeSites, readSites, true},
    {"agents", writeAgents, readAgents, true},
    {"tests", writeTests, readTests, true},
    {"manifest", writeManifest, readManifest, false},
};
static_assert(std::size(kSections) == kSectionCount);

const char* sectionName(uint32_t id) { return kSections[id - 1].name; }

uint64_t checksumOf(std::string_view bytes) {
    return XXH3_64bits(bytes.data() + kRbcChecksumEnd, bytes.size() - kRbcChecksumEnd);
}

void putLE(std::string& bytes, size_t offset, uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes[offset + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// The header's fixed-width hash fields hold the hex digits, padded with zero bytes when shorter
// (only an invalid module has a shorter hash, and the verifier rejects it on load).
void writeHash(Writer& w, std::string_view hash) {
    hash = hash.substr(0, kHashBytes);
    w.out.append(hash);
    w.out.append(kHashBytes - hash.size(), '\0');
}

struct SectionEntry {
    uint32_t id, offset, size;
};

// Reads and checks the header and section table; returns the sections in id order.
std::string readLayout(std::string_view bytes, Module& m, std::array<SectionEntry, kSectionCount>& sections) {
    if (bytes.size() > kMaxRbcBytes)
        return fmt::format("file is {} bytes, over the limit of {}", bytes.size(), kMaxRbcBytes);
    // Compare as much of the magic as there is, so a short file of the right kind is "truncated".
    size_t magicBytes = std::min(bytes.size(), kRbcMagic.size());
    if (!std::equal(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(magicBytes), kRbcMagic.begin()))
        return "not a .rbc file (wrong magic bytes)";
    if (bytes.size() < kRbcChecksumEnd)
        return fmt::format("file is truncated: {} bytes, shorter than the {}-byte header", bytes.size(),
                           kRbcHeaderSize);
    uint32_t version = static_cast<uint32_t>(readLE(bytes.data() + 8, 4));
    if (version != kRbcVersion)
        return fmt::format("unsupported .rbc version {} (this build reads version {}; rebuild the program)", version,
                           kRbcVersion);
    uint64_t stored = readLE(bytes.data() + kRbcChecksumOffset, 8);
    uint64_t computed = checksumOf(bytes);
    if (stored != computed)
        return fmt::format("checksum mismatch (stored {:016x}, computed {:016x}): the file is corrupt", stored,
                           computed);
    if (bytes.size() < kRbcHeaderSize)
        return fmt::format("file is truncated: {} bytes, shorter than the {}-byte header", bytes.size(),
                           kRbcHeaderSize);
    // Bit 0 (signed) was read by splitSignedRbc, which cut the signature block off `bytes`.
    if (uint32_t flags = static_cast<uint32_t>(readLE(bytes.data() + kRbcFlagsOffset, 4)); flags & ~kRbcFlagSigned)
        return fmt::format("header flags are {:#x}; version {} defines only bit 0 (signed)", flags, kRbcVersion);
    m.programHash.assign(bytes.substr(kProgramHashOffset, kHashBytes));
    m.hostHash.assign(bytes.substr(kHostHashOffset, kHashBytes));

    uint32_t count = static_cast<uint32_t>(readLE(bytes.data() + kSectionCountOffset, 4));
    if (count > kMaxSections)
        return fmt::format("section table has {} entries; version {} has {} sections", count, kRbcVersion,
                           kSectionCount);
    size_t tableEnd = kRbcHeaderSize + kSectionEntryBytes * count;
    if (bytes.size() < tableEnd)
        return fmt::format("file is truncated: {} bytes, shorter than its section table ({} bytes)", bytes.size(),
                           tableEnd);
    // Sections follow the table back to back, in increasing id: no gaps, overlaps or trailing
    // bytes, so every byte of the file has exactly one meaning.
    size_t expectedOffset = tableEnd;
    std::array<bool, kSectionCount> seen{};
    uint32_t previousId = 0;
    for (uint32_t i = 0; i < count; ++i) {
        const char* e = bytes.data() + kRbcHeaderSize + kSectionEntryBytes * i;
        SectionEntry s{static_cast<uint32_t>(readLE(e, 4)), static_cast<uint32_t>(readLE(e + 4, 4)),
                       static_cast<uint32_t>(readLE(e + 8, 4))};
        if (s.id < 1 || s.id > kSectionCount) return fmt::format("section table entry {}: unknown section id {}", i, s.id);
        std::string name = fmt::format("section '{}'", sectionName(s.id));
        if (seen[s.id - 1]) return name + " appears twice in the section table";
        seen[s.id - 1] = true;
        if (s.id < previousId)
            return fmt::format("{} comes after section '{}'; sections must be in id order", name,
                               sectionName(previousId));
        if (uint64_t{s.offset} + s.size > bytes.size())
            return fmt::format("{} (bytes {}..{}) ends past the end of the file ({} bytes)", name, s.offset,
                               uint64_t{s.offset} + s.size, bytes.size());
        if (s.offset < expectedOffset)
            return fmt::format("{} starts at byte {}, overlapping what comes before it (which ends at {})", name,
                               s.offset, expectedOffset);
        if (s.offset > expectedOffset)
            return fmt::format("{} starts at byte {}, leaving a gap after byte {}", name, s.offset, expectedOffset);
        expectedOffset = size_t{s.offset} + s.size;
        sections[s.id - 1] = s;
        previousId = s.id;
    }
    for (uint32_t id = 1; id <= kSectionCount; ++id)
        if (!seen[id - 1]) return fmt::format("section '{}' is missing", sectionName(id));
    if (expectedOffset != bytes.size())
        return fmt::format("{} bytes of trailing data after the last section", bytes.size() - expectedOffset);
    return {};
}

}  // namespace

std::string programHashOf(const Module& module) {
    // Each hashed section as the file encodes it (less the source file name and spans), preceded
    // by its length, after a version tag: bump the tag whenever what is covered changes.
    std::string covered = "remit-module-hash-v1\n";
    for (const SectionSpec& section : kSections) {
        if (!section.hashed) continue;
        Writer w;
        w.forHash = true;
        section.write(w, module);
        Writer length;
        length.u64(w.out.size());
        covered += length.out;
        covered += w.out;
    }
    return sha256Hex(covered);
}

void sealProgramHash(Module& module) { module.programHash = programHashOf(module); }

std::string writeRbc(const Module& module) {
    std::array<std::string, kSectionCount> bodies;
    for (uint32_t i = 0; i < kSectionCount; ++i) {
        Writer w;
        kSections[i].write(w, module);
        bodies[i] = std::move(w.out);
    }
    Writer w;
    w.out.append(kRbcMagic.data(), kRbcMagic.size());
    w.u32(kRbcVersion);
    w.u32(0);  // flags
    w.u64(0);  // checksum, filled in last
    writeHash(w, module.programHash);
    writeHash(w, module.hostHash);
    w.u32(kSectionCount);
    size_t offset = kRbcHeaderSize + kSectionEntryBytes * kSectionCount;
    for (uint32_t i = 0; i < kSectionCount; ++i) {
        w.u32(i + 1);
        w.u32(static_cast<uint32_t>(offset));
        w.u32(static_cast<uint32_t>(bodies[i].size()));
        offset += bodies[i].size();
    }
    for (const std::string& body : bodies) w.out += body;
    resealRbc(w.out);
    return std::move(w.out);
}

void resealRbc(std::string& bytes) {
    if (bytes.size() < kRbcChecksumEnd) return;
    RbcParts parts;
    (void)splitSignedRbc(bytes, parts);  // a malformed block leaves the whole file as the body
    putLE(bytes, kRbcChecksumOffset, checksumOf(parts.body), 8);
}

void resealRbcWithProgramHash(std::string& bytes) {
    resealRbc(bytes);
    // Parse without verifying: the hash covers fields, whatever they hold.
    auto module = std::make_unique<Module>();
    std::array<SectionEntry, kSectionCount> sections{};
    RbcParts parts;
    (void)splitSignedRbc(bytes, parts);
    if (!readLayout(parts.body, *module, sections).empty()) return;
    for (const SectionEntry& s : sections) {
        Reader r(parts.body, s.offset, s.size, sectionName(s.id));
        kSections[s.id - 1].read(r, *module);
        r.finish();
        if (!r.ok()) return;
    }
    std::string hash = programHashOf(*module);
    std::copy(hash.begin(), hash.end(), bytes.begin() + kProgramHashOffset);
    resealRbc(bytes);
}

RbcLoadResult loadRbc(std::string_view file) {
    RbcLoadResult result;
    if (file.size() > kMaxRbcBytes) {
        result.error = fmt::format("file is {} bytes, over the limit of {}", file.size(), kMaxRbcBytes);
        return result;
    }
    // A signed file's signature first: if any byte changed, that is the one thing to say about it.
    RbcParts parts;
    result.error = splitSignedRbc(file, parts);
    if (!result.error.empty()) return result;
    if (parts.signature) {
        if (std::string unsupported = signatureSupportError(); !unsupported.empty()) {
            result.error = fmt::format("signature: the file is signed by {}, but its signature cannot be checked: {}",
                                       signerName(parts.signature->publicKey), unsupported);
            return result;
        }
    }
    if (parts.signature && !signatureMatches(parts.body, *parts.signature)) {
        result.error = fmt::format(
            "signature: the file is signed by {}, but its content does not match the "
            "signature (it was changed after it was signed)",
            signerName(parts.signature->publicKey));
        return result;
    }
    std::string_view bytes = parts.body;
    auto module = std::make_unique<Module>();
    std::array<SectionEntry, kSectionCount> sections{};
    result.error = readLayout(bytes, *module, sections);
    if (!result.error.empty()) return result;
    for (const SectionEntry& s : sections) {
        Reader r(bytes, s.offset, s.size, sectionName(s.id));
        kSections[s.id - 1].read(r, *module);
        r.finish();
        if (!r.ok()) {
            result.error = r.error();
            return result;
        }
    }
    result.error = verifyModule(*module);
    if (!result.error.empty()) return result;
    // The header's program hash is a claim; what binds approvals, resumes and traces is the hash
    // of what was just verified. They must agree, or a file could borrow another program's
    // approvals by copying its hash (and the file would not be canonical).
    if (std::string computed = programHashOf(*module); computed != module->programHash) {
        result.error = fmt::format(
            "program hash: the header says {} but the module's content hashes to {} (the file was changed "
            "after it was built)",
            module->programHash, computed);
        return result;
    }
    result.module = std::move(module);
    result.signature = std::move(parts.signature);
    return result;
}

}  // namespace remit
