// The VM through its run API (vm/run.h): programs compiled from source run to
// the prototype's values; runs stop at host calls exposing the site, resource, tagged arguments
// and pc tags, and resume with a result, a retried error, a fallback or a failure; labels follow
// docs/language.md "Labels, exactly"; limits and the host abort stop runs with R0701 and R0702.
#include <doctest/doctest.h>

#include <thread>

#include "session/pipeline.h"
#include "vm/run.h"
#include "runtime/value_json.h"
#include "bytecode/verifier.h"

namespace {

using namespace remit;

constexpr const char* kHost =
    "capability crm.lookup(id: Str) -> Str\n  tags private\n  idempotent\n"
    "capability mail.send(to: Str, body: Str)\n"
    "model llm cost 0.01\n"
    "input ticket tags untrusted\n";

std::shared_ptr<const LoadedProgram> compile(const std::string& source) {
    CompileOutcome out = compileProgram(source, "t.rmt", kHost, "host.rmti");
    std::string messages;
    for (const Diagnostic& d : out.diagnostics.items()) messages += d.message + "\n";
    INFO(messages);
    REQUIRE(out.program);
    return out.program;
}

std::string resultJson(Run& run) {
    REQUIRE(run.status() == RunStatus::Completed);
    return valueToJson(run.result())->dump();
}

std::vector<std::string> tagNames(Run& run, TagSetId tags) { return run.heap().tagTable().names(tags); }

TEST_CASE("vm: a pure program runs to its value") {
    auto program = compile(
        "program p\n"
        "fn fib() -> List[Int] max 20 {\n"
        "  var xs = [0, 1]\n"
        "  for i in range(18) {\n"
        "    xs = xs + [xs[-1] + xs[-2]]\n"
        "  }\n"
        "  return take(xs, 20)\n"
        "}\n"
        "fn main() -> Int {\n"
        "  return sum(fib())\n"
        "}\n");
    Run run(program, {});
    CHECK(run.start(program->entry(), {}) == RunStatus::Completed);
    CHECK(resultJson(run) == "10945");
}

TEST_CASE("vm: a run stops at a host call and resumes with the result") {
    auto program = compile(
        "program p\nuses crm.lookup, mail.send\n"
        "fn main(ticket: Str) -> Str {\n"
        "  let who = crm.lookup(ticket)\n"
        "  if ticket == \"vip\" {\n"
        "    mail.send(to: who, body: \"hello {who}\")\n"
        "  }\n"
        "  return who\n"
        "}\n");
    Run run(program, {});
    TagSetId untrusted = *run.heap().internTags({"untrusted"});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("vip", untrusted));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::HostCall);
    const HostCall& lookup = run.hostCall();
    CHECK(lookup.site->id == "main#0");
    CHECK(lookup.site->resource == "crm.lookup");
    CHECK(lookup.site->span.line == 4);
    REQUIRE(lookup.args.size() == 1);
    CHECK(lookup.args[0].asStr() == "vip");
    CHECK(tagNames(run, lookup.args[0].tags()) == std::vector<std::string>{"untrusted"});
    CHECK(lookup.pcTags == kNoTags);

    TagSetId privateTags = *run.heap().internTags({"private"});
    REQUIRE(run.resumeWithResult(*run.heap().makeStr("ada", privateTags)) == RunStatus::HostCall);
    const HostCall& send = run.hostCall();
    CHECK(send.site->id == "main#1");
    CHECK(send.site->argNames == std::vector<std::string>{"to", "body"});
    // Under `if ticket == "vip"` the pc carries the ticket's tags.
    CHECK(tagNames(run, send.pcTags) == std::vector<std::string>{"untrusted"});
    CHECK(send.args[1].asStr() == "hello ada");
    CHECK(tagNames(run, send.args[1].tags()) == std::vector<std::string>{"private"});
    REQUIRE(run.resumeWithResult(Value()) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"ada\"");
}

TEST_CASE("vm: operational errors are retried, then take the else branch") {
    auto program = compile(
        "program p\nuses crm.lookup\n"
        "fn main() -> Str {\n"
        "  return crm.lookup(\"x\") retry 2 else \"fallback\"\n"
        "}\n");
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::HostCall);
    for (uint32_t attempt = 0; attempt < 2; ++attempt) {
        CHECK(run.hostCall().attempt == attempt);
        CHECK_FALSE(run.willFallBack(true));
        REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0501, "down", {}}, true) == RunStatus::HostCall);
    }
    CHECK(run.hostCall().attempt == 2);
    CHECK(run.hostCall().args[0].asStr() == "x");  // the same call again
    CHECK(run.willFallBack(true));
    REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0501, "down", {}}, true) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"fallback\"");
}

TEST_CASE("vm: a security error is never caught by else") {
    auto program = compile(
        "program p\nuses crm.lookup\n"
        "fn main() -> Str {\n"
        "  return crm.lookup(\"x\") retry 2 else \"fallback\"\n"
        "}\n");
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::HostCall);
    REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0301, "denied", {}}, false) == RunStatus::Failed);
    CHECK(run.failure().error.code == DiagCode::R0301);
    CHECK(run.failure().span.line == 4);
}

TEST_CASE("vm: model calls carry the requested type and prompt/context") {
    auto program = compile(
        "program p\nuses llm\n"
        "type Verdict = { label: \"spam\" | \"ham\", score: Float }\n"
        "fn main(ticket: Str) -> Str {\n"
        "  let v = llm.ask(Verdict, \"classify\", context: ticket)\n"
        "  return v.label\n"
        "}\n");
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("buy now", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::HostCall);
    const HostCall& call = run.hostCall();
    CHECK(call.site->kind == SiteKind::Model);
    CHECK(call.site->resource == "llm");
    REQUIRE(call.askType);
    CHECK(showType(call.askType) == "Verdict");
    CHECK(call.args[0].asStr() == "classify");
    CHECK(call.args[1].asStr() == "buy now");
    nlohmann::json answer = {{"label", "ham"}, {"score", 0.5}};
    ValueFromJson v = valueFromJson(run.heap(), answer, call.askType, "output");
    REQUIRE(v.value);
    REQUIRE(run.resumeWithResult(std::move(*v.value)) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"ham\"");
}

TEST_CASE("vm: labels follow the prototype's rules") {
    auto program = compile(
        "program p\n"
        "fn main(ticket: Str) -> { a: Str, b: Int, c: Bool, d: List[Str] max 2 } {\n"
        "  let xs = [ticket, \"clean\"]\n"
        "  var n = 0\n"
        "  if len(ticket) > 3 {\n"
        "    n = 1\n"
        "  }\n"
        "  return { a: xs[1], b: len(\"abc\"), c: ticket == \"x\", d: xs }\n"
        "}\n");
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("long ticket", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
    const RecordObject& r = run.result().asRecord();
    // A clean element of a list holding a tagged one stays clean (tags are per element).
    CHECK(tagNames(run, r.values[0].tags()).empty());
    CHECK(tagNames(run, r.values[1].tags()).empty());
    CHECK(tagNames(run, r.values[2].tags()) == std::vector<std::string>{"untrusted"});  // == labels deeply
    CHECK(tagNames(run, contentTags(r.values[3])) == std::vector<std::string>{"untrusted"});
}

TEST_CASE("vm: the step limit, the memory limit and the host abort") {
    auto program = compile(
        "program p\nfn main() -> Int {\n  var t = 0\n  for i in range(100000000) {\n    t = t + 1\n  }\n"
        "  return t\n}\n");
    SUBCASE("steps") {
        VmLimits limits;
        limits.maxSteps = 10000;
        Run run(program, limits);
        REQUIRE(run.start(program->entry(), {}) == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0701);
        CHECK(run.failure().error.details["limit"] == "steps");
        CHECK(run.stepsUsed() > 10000);
        CHECK(run.stepsUsed() < 10100);
    }
    SUBCASE("abort from another thread") {
        VmLimits limits;
        limits.maxSteps = UINT64_MAX / 2;
        limits.maxWallMs = 600000;
        Run run(program, limits);
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            run.requestAbort();
        });
        RunStatus status = run.start(program->entry(), {});
        aborter.join();
        REQUIRE(status == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0702);
    }
    SUBCASE("memory") {
        auto growing = compile(
            "program p\nfn main() -> Int {\n  var s = \"\"\n  for i in range(100000000) {\n"
            "    s = s + \"more text {i}\"\n  }\n  return len(s)\n}\n");
        VmLimits limits;
        limits.maxSteps = UINT64_MAX / 2;
        limits.maxMemory = 1 << 20;
        Run run(growing, limits);
        REQUIRE(run.start(growing->entry(), {}) == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0701);
        CHECK(run.heap().peakBytes() <= (1u << 20));
    }
}

size_t countOps(const LoadedProgram& program, Op op) {
    size_t n = 0;
    for (const Function& f : program.module().functions)
        for (const Instr& in : f.code) n += in.op == op;
    return n;
}

TEST_CASE("vm: fused compare-and-branch agrees with the comparison it replaces") {
    // Each loop filter below is a comparison whose Bool nothing else reads, so it compiles to
    // IFLT, IFLE, IFEQ or IFNE followed by a JMP (`>` and `>=` swap the operands); the edge cases
    // are equal operands, Int against Float (compared exactly, as Python does: 2^53 + 1 > 2^53),
    // -0.0 against 0.0, strings, and structural equality of lists.
    const char* conditions[] = {"2 < 3",      "3 < 3",         "3 <= 3",       "3 > 3",
                                "3 >= 4",     "neg < 0.0",     "0.0 <= neg",   "big > 9007199254740992.0",
                                "1 < 1.5",    "\"abc\" < \"abd\"", "\"b\" <= \"a\"",  "xs[0] == xs[1]",
                                "neg == 0.0", "[1] != [1]",    "\"x\" != \"y\""};
    std::string source =
        "program p\nfn main() -> List[Int] max 30 {\n  let big = 9007199254740993\n  let xs = [[1, 2], [1, 2]]\n"
        "  let neg = -0.0\n";
    std::string names;
    for (size_t k = 0; k < std::size(conditions); ++k) {
        source += "  let c" + std::to_string(k) + " = len(for j in range(1) if " + conditions[k] + " {\n    1\n  })\n";
        names += (k ? ", c" : "c") + std::to_string(k);
    }
    // An `if` without a value that only breaks: the fused branch's JMP is the break, taken unless
    // the negated comparison holds (not j >= 2 is IFLT j, 2).
    const char* breaks[] = {"j >= 2", "neg < 0.0", "0.0 <= neg", "\"b\" > \"a\"", "j == 1", "j != 0"};
    for (size_t k = 0; k < std::size(breaks); ++k) {
        source += "  let b" + std::to_string(k) + " = len(for j in range(5) {\n    if " + breaks[k] +
                  " {\n      break\n    }\n    j\n  })\n";
        names += ", b" + std::to_string(k);
    }
    source += "  return [" + names + "]\n}\n";
    CAPTURE(source);
    auto program = compile(source);
    // An Int against a small Int literal takes the immediate forms (2 < 3 and 3 < 3: IFLTIMM,
    // 3 > 3: IFGTIMM, 3 <= 3: IFLEIMM, 3 >= 4: IFGEIMM). Negated for the breaks: IFLTIMM j 2,
    // IFLE 0.0 neg, IFLT neg 0.0, IFLE "b" "a", IFNEIMM j 1, IFEQIMM j 0.
    CHECK(countOps(*program, Op::IFLT) == 4 + 1);
    CHECK(countOps(*program, Op::IFLE) == 2 + 2);
    CHECK(countOps(*program, Op::IFEQ) == 2);
    CHECK(countOps(*program, Op::IFNE) == 2);
    CHECK(countOps(*program, Op::IFLTIMM) == 2 + 1);
    CHECK(countOps(*program, Op::IFGTIMM) == 1);
    CHECK(countOps(*program, Op::IFLEIMM) == 1);
    CHECK(countOps(*program, Op::IFGEIMM) == 1);
    CHECK(countOps(*program, Op::IFNEIMM) == 1);
    CHECK(countOps(*program, Op::IFEQIMM) == 1);
    CHECK(countOps(*program, Op::JMPIFNOT) == 0);
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::Completed);
    CHECK(resultJson(run) == "[1,0,1,0,0,0,1,1,1,1,0,1,1,0,1,2,5,0,0,1,1]");
}

TEST_CASE("vm: fused branches are emitted only where the condition's Bool is not needed") {
    auto program = compile(
        "program p\n"
        "fn main(ticket: Str) -> Int {\n"
        "  var n = 0\n"
        "  let size = len(ticket)\n"
        "  for i in range(10) if i < size {\n"  // the body writes n: PCENTER needs the Bool
        "    n = n + 1\n"
        "  }\n"
        "  let small = for i in range(10) if i <= size {\n"  // the body only yields i: fused
        "    i\n"
        "  }\n"
        "  if size == 11 {\n"  // writes n: not fused
        "    n = n + 100\n"
        "  }\n"
        "  let label = if size != 3 { 1 } else { 2 }\n"  // a value: ADDLABELS needs the Bool
        "  let upto = for j in range(3) {\n"
        "    if j > size {\n"  // no value, no write, only a break: fused and negated (IFLE j, size)
        "      break\n"
        "    }\n"
        "    j\n"
        "  }\n"
        "  return n + len(small) * 1000 + label * 100000 + len(upto) * 1000000\n"
        "}\n");
    CHECK(countOps(*program, Op::IFLE) == 2);
    CHECK(countOps(*program, Op::IFLT) == 0);
    CHECK(countOps(*program, Op::IFEQ) == 0);
    CHECK(countOps(*program, Op::IFNE) == 0);
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("long ticket", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
    // The tagged `size` (11) takes the fused branches' generic path: i <= 11 keeps all ten, and
    // no j exceeds it.
    CHECK(run.result().asInt() == 110 + 10 * 1000 + 100000 + 3 * 1000000);
    // Tags still flow through the conditions that were not fused.
    CHECK(tagNames(run, run.result().tags()) == std::vector<std::string>{"untrusted"});
}

// A hand-built (as if forged) function: the verifier accepts it, and the VM must not misbehave
// when a fused branch meets operands the checker would have rejected.
std::shared_ptr<const LoadedProgram> forged(std::vector<Instr> code, uint32_t numRegs, std::vector<Constant> k = {}) {
    auto m = std::make_unique<Module>();
    m->programName = "forged";
    m->programHash = std::string(64, 'a');
    m->hostHash = std::string(64, 'b');
    m->manifestJson = "{}";
    m->constants = std::move(k);
    Function f;
    f.name = "main";
    f.numRegs = numRegs;
    f.spans.assign(code.size(), Span{1, 1, 1, 2});
    f.code = std::move(code);
    m->functions.push_back(std::move(f));
    m->entry = 0;
    std::string error = verifyModule(*m);
    INFO(error);
    REQUIRE(error.empty());
    return std::make_shared<LoadedProgram>(std::move(m));
}

TEST_CASE("vm: a fused branch on operands of the wrong kinds is R0101, and its JMP is taken or skipped") {
    Constant str{Constant::Kind::Str, 0, 0, "x"};
    SUBCASE("ordering a Str against an Int") {
        auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abc(Op::LOADI, 1, 1), Instr::abc(Op::IFLT, 0, 1),
                               Instr::abx(Op::JMP, 0, 4), Instr::abc(Op::RETUNIT, 0)},
                              2, {str});
        Run run(program, {});
        REQUIRE(run.start(0, {}) == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0101);
        CHECK(run.failure().span.line == 1);
    }
    SUBCASE("equality of different kinds is false, not an error") {
        // r2 = 1 when the branch falls through (equal), 2 when it takes the JMP.
        for (Op op : {Op::IFEQ, Op::IFNE}) {
            auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abc(Op::LOADI, 1, 1), Instr::abc(op, 0, 1),
                                   Instr::abx(Op::JMP, 0, 6), Instr::abc(Op::LOADI, 2, 1), Instr::abc(Op::RET, 2),
                                   Instr::abc(Op::LOADI, 2, 2), Instr::abc(Op::RET, 2)},
                                  3, {str});
            Run run(program, {});
            REQUIRE(run.start(0, {}) == RunStatus::Completed);
            CHECK(run.result().asInt() == (op == Op::IFEQ ? 2 : 1));
        }
    }
    SUBCASE("Int against Float and Unit against Unit") {
        Constant half{Constant::Kind::Float, 0, 0.5, {}};
        auto program = forged({Instr::abc(Op::LOADI, 0, 0), Instr::abx(Op::LOADK, 1, 0), Instr::abc(Op::IFLE, 1, 0),
                               Instr::abx(Op::JMP, 0, 5), Instr::abc(Op::RETUNIT, 0), Instr::abc(Op::IFEQ, 2, 3),
                               Instr::abx(Op::JMP, 0, 8), Instr::abc(Op::RET, 1), Instr::abc(Op::RETUNIT, 0)},
                              4, {half});
        Run run(program, {});
        REQUIRE(run.start(0, {}) == RunStatus::Completed);
        // 0.5 <= 0 fails (JMP to 5); Unit == Unit holds (falls through to RET r1).
        CHECK(resultJson(run) == "0.5");
    }
}

TEST_CASE("vm: immediate operands agree with the register forms they replace") {
    // An Int compared with a small literal on either side (loop filters, and the negated forms of
    // breaks), and an Int plus or minus one. 65535 is the largest immediate; 65536 stays a register.
    auto program = compile(
        "program p\n"
        "fn main() -> List[Int] max 20 {\n"
        "  let big = 65536\n"
        "  let a = len(for j in range(5) if j < 2 { j })\n"
        "  let b = len(for j in range(5) if 2 < j { j })\n"
        "  let c = len(for j in range(5) if j <= 0 { j })\n"
        "  let d = len(for j in range(5) if 3 >= j { j })\n"
        "  let e = len(for j in range(5) if j == 4 { j })\n"
        "  let f = len(for j in range(5) if 0 != j { j })\n"
        "  let g = len(for j in range(5) if big >= 65535 { j })\n"
        "  let h = len(for j in range(5) if big < 65536 { j })\n"
        "  let i = len(for j in range(5) {\n    if j >= 3 {\n      break\n    }\n    j\n  })\n"
        "  let k = len(for j in range(5) {\n    if j == 1 {\n      break\n    }\n    j\n  })\n"
        "  let m = big + 1\n"
        "  let n = big - 65535\n"
        "  let o = big + 65536\n"
        "  return [a, b, c, d, e, f, g, h, i, k, m, n, o]\n"
        "}\n");
    // The breaks are negated: not (j >= 3) is j < 3, not (j == 1) is j != 1.
    CHECK(countOps(*program, Op::IFLTIMM) == 1 + 1);
    CHECK(countOps(*program, Op::IFGTIMM) == 1);
    CHECK(countOps(*program, Op::IFLEIMM) == 2);
    CHECK(countOps(*program, Op::IFGEIMM) == 1);
    CHECK(countOps(*program, Op::IFEQIMM) == 1);
    CHECK(countOps(*program, Op::IFNEIMM) == 1 + 1);
    CHECK(countOps(*program, Op::IFLT) == 1);
    CHECK(countOps(*program, Op::ADDIMM) == 1);
    CHECK(countOps(*program, Op::SUBIMM) == 1);
    CHECK(countOps(*program, Op::ADDI) == 1);
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::Completed);
    CHECK(resultJson(run) == "[2,2,1,4,1,4,5,0,3,1,65537,1,131072]");
}

TEST_CASE("vm: immediate operands on a labelled Int take the generic path, labels and errors included") {
    auto program = compile(
        "program p\n"
        "fn main(ticket: Str) -> Int {\n"
        "  let size = len(ticket)\n"
        "  let small = for i in range(20) if size >= 11 { i }\n"
        "  let few = for i in range(20) if 12 == size { i }\n"
        "  return len(small) * 100 + len(few) * 10000 + (size - 1)\n"
        "}\n");
    CHECK(countOps(*program, Op::IFGEIMM) == 1);
    CHECK(countOps(*program, Op::IFEQIMM) == 1);
    CHECK(countOps(*program, Op::SUBIMM) == 1);
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("long ticket", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
    CHECK(run.result().asInt() == 20 * 100 + 10);
    CHECK(tagNames(run, run.result().tags()) == std::vector<std::string>{"untrusted"});

    // An overflow is the same error whether the literal is an immediate or a register.
    for (const char* op : {"+", "-"}) {
        CAPTURE(op);
        std::string top = op[0] == '+' ? "9223372036854775807" : "0 - 9223372036854775807 - 1";
        auto immediate = compile(std::string("program p\nfn main() -> Int {\n  let top = ") + top + "\n  return top " +
                                 op + " 1\n}\n");
        auto viaRegister = compile(std::string("program p\nfn main() -> Int {\n  let top = ") + top +
                                   "\n  let one = 1\n  return top " + op + " one\n}\n");
        // (top's own `- 1` is a SUBIMM too, which does not overflow)
        CHECK(countOps(*immediate, op[0] == '+' ? Op::ADDIMM : Op::SUBIMM) == (op[0] == '+' ? 1u : 2u));
        Run a(immediate, {}), b(viaRegister, {});
        REQUIRE(a.start(immediate->entry(), {}) == RunStatus::Failed);
        REQUIRE(b.start(viaRegister->entry(), {}) == RunStatus::Failed);
        CHECK(a.failure().error.code == b.failure().error.code);
        CHECK(a.failure().error.message == b.failure().error.message);
    }
}

TEST_CASE("vm: immediate operands on values of the wrong kinds (a forged .rbc) are R0101 or false, never a crash") {
    Constant str{Constant::Kind::Str, 0, 0, "x"};
    Constant half{Constant::Kind::Float, 0, 0.5, {}};
    SUBCASE("ADDIMM and SUBIMM on a Str") {
        for (Op op : {Op::ADDIMM, Op::SUBIMM}) {
            auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abc(op, 1, 0, 7), Instr::abc(Op::RET, 1)}, 2, {str});
            Run run(program, {});
            REQUIRE(run.start(0, {}) == RunStatus::Failed);
            CHECK(run.failure().error.code == DiagCode::R0101);
        }
    }
    SUBCASE("ordering a Str against an immediate") {
        for (Op op : {Op::IFLTIMM, Op::IFLEIMM, Op::IFGTIMM, Op::IFGEIMM}) {
            auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abc(op, 0, 1), Instr::abx(Op::JMP, 0, 3),
                                   Instr::abc(Op::RETUNIT, 0)},
                                  1, {str});
            Run run(program, {});
            REQUIRE(run.start(0, {}) == RunStatus::Failed);
            CHECK(run.failure().error.code == DiagCode::R0101);
        }
    }
    SUBCASE("equality of a Str and an immediate is false; a Float compares exactly") {
        // r1 = 1 when the branch falls through (the comparison holds), 2 when it takes the JMP.
        auto outcome = [&](Op op, const Constant& k, uint16_t imm) {
            auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abc(op, 0, imm), Instr::abx(Op::JMP, 0, 5),
                                   Instr::abc(Op::LOADI, 1, 1), Instr::abc(Op::RET, 1), Instr::abc(Op::LOADI, 1, 2),
                                   Instr::abc(Op::RET, 1)},
                                  2, {k});
            Run run(program, {});
            REQUIRE(run.start(0, {}) == RunStatus::Completed);
            return run.result().asInt();
        };
        CHECK(outcome(Op::IFEQIMM, str, 0) == 2);
        CHECK(outcome(Op::IFNEIMM, str, 0) == 1);
        CHECK(outcome(Op::IFGTIMM, half, 0) == 1);  // 0.5 > 0
        CHECK(outcome(Op::IFGEIMM, half, 1) == 2);  // 0.5 >= 1 fails
        CHECK(outcome(Op::IFLTIMM, half, 1) == 1);  // 0.5 < 1
        CHECK(outcome(Op::IFEQIMM, half, 0) == 2);  // 0.5 == 0 fails
    }
}

// Labels of every node of a value, as text: two runs that label alike print alike.
std::string labelled(Run& run, const Value& v) {
    std::string out = valueToJson(v)->dump() + "<";
    for (const std::string& t : tagNames(run, v.tags())) out += t + ",";
    out += ">";
    if (v.kind() == ValueKind::List)
        for (const Value& item : v.asList().items) out += labelled(run, item);
    if (v.kind() == ValueKind::Record)
        for (const Value& field : v.asRecord().values) out += labelled(run, field);
    return out;
}

TEST_CASE("vm: an inlined call computes and labels exactly as the call it replaces") {
    // The same callees twice: small leaves, which the code generator inlines, and the same bodies
    // with a call in front (a callee that calls is never inlined). Tagged data drives early returns
    // under a tagged condition (the value takes the pc's tags), a return from inside a loop, a
    // for-expression returned into the variable passed as the argument (x = f(x)), named
    // arguments out of order, and a Unit function.
    std::string callees =
        "fn pick(t: Str, n: Int) -> Int {\n  PAD  if len(t) > n {\n    return 1\n  }\n  return 2\n}\n"
        "fn grow(xs: List[Int], k: Int) -> List[Int] {\n  PAD  return for x in xs limit 10 {\n    x + k\n  }\n}\n"
        "fn first_big(xs: List[Int], bound: Int) -> Int {\n  PAD  for x in xs limit 10 {\n"
        "    if x > bound {\n      return x\n    }\n  }\n  return -1\n}\n"
        "fn shout(t: Str) -> Str {\n  PAD  let u = upper(t)\n  return \"{u}!\"\n}\n"
        "fn nothing(t: Str) {\n  PAD  let u = upper(t)\n}\n"
        "fn one() -> Int {\n  return 1\n}\n";
    std::string body =
        "fn main(ticket: Str) -> { a: Int, b: Int, c: Str, d: Int, e: Int, xs: List[Int] } {\n"
        "  var xs = [1, 5, 9, len(ticket)]\n"
        "  xs = grow(xs, 1)\n"
        "  let a = pick(ticket, 3)\n"
        "  let b = first_big(xs, len(ticket) - 4)\n"
        "  let c = shout(ticket)\n"
        "  let d = pick(n: 100, t: \"abc\")\n"
        "  nothing(ticket)\n"
        "  var e = 0\n"
        "  for t in [ticket, \"x\"] {\n    e = e + pick(t, 1)\n  }\n"
        "  return { a: a, b: b, c: c, d: d, e: e, xs: xs }\n"
        "}\n";
    auto build = [&](const std::string& pad) {
        std::string c = callees;
        for (size_t at; (at = c.find("PAD")) != std::string::npos;) c.replace(at, 3, pad);
        return compile("program p\n" + c + body);
    };
    auto inlined = build("");
    auto called = build("let pad = one()\n  ");
    auto mainCalls = [](const LoadedProgram& p) {
        size_t n = 0;
        for (const Instr& in : p.module().functions[p.entry()].code) n += in.op == Op::CALL;
        return n;
    };
    CHECK(mainCalls(*inlined) == 0);
    CHECK(mainCalls(*called) == 7);
    for (const char* ticket : {"long ticket", "ab"}) {
        CAPTURE(ticket);
        std::string results[2];
        for (int k = 0; k < 2; ++k) {
            auto program = k == 0 ? inlined : called;
            Run run(program, {});
            std::vector<Value> args;
            args.push_back(*run.heap().makeStr(ticket, *run.heap().internTags({"untrusted"})));
            REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
            results[k] = labelled(run, run.result());
        }
        CHECK(results[0] == results[1]);
        // The pc a tagged condition raised reaches the returned value.
        CHECK(results[0].find("<untrusted,>") != std::string::npos);
    }
}

TEST_CASE("vm: label instructions the checker proves idle are left out, and labels stay exact") {
    // main's conditions on untagged values need no PCENTER (the pc stays empty), so neither do the
    // writes under them; `helper` is only called under an empty pc, so its writes need no TAINTPC;
    // `tagged` is called under a tagged pc, so its writes keep theirs; the untrusted input's
    // condition keeps its PCENTER.
    auto program = compile(
        "program p\n"
        "fn helper(n: Int) -> Int {\n  var t = 0\n  for i in range(50) if i < n {\n    if i % 2 == 0 {\n"
        "      t = t + i\n    }\n  }\n  return t\n}\n"
        "fn tagged(n: Int) -> Int {\n  var t = 0\n  for i in range(50) if i < n {\n    t = t + 1\n  }\n  return t\n}\n"
        "fn main(ticket: Str) -> { a: Int, b: Int, c: Int } {\n"
        "  var a = 0\n"
        "  for i in range(10) {\n    if i > 4 {\n      a = a + helper(i)\n    }\n  }\n"
        "  var b = 0\n"
        "  if len(ticket) > 3 {\n    b = tagged(20)\n  }\n"
        "  return { a: a, b: b, c: helper(7) }\n"
        "}\n");
    const Module& m = program->module();
    auto ops = [&](const std::string& fn, Op op) {
        size_t n = 0;
        for (const Function& f : m.functions)
            if (f.name == fn)
                for (const Instr& in : f.code) n += in.op == op;
        return n;
    };
    CHECK(ops("helper", Op::TAINTPC) == 0);
    CHECK(ops("helper", Op::PCENTER) == 0);
    CHECK(ops("tagged", Op::TAINTPC) > 0);
    CHECK(ops("main", Op::PCENTER) == 1);
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("long ticket", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
    const RecordObject& r = run.result().asRecord();
    CHECK(resultJson(run) == "{\"a\":56,\"b\":20,\"c\":12}");
    CHECK(tagNames(run, r.values[0].tags()).empty());
    CHECK(tagNames(run, r.values[1].tags()) == std::vector<std::string>{"untrusted"});
    CHECK(tagNames(run, r.values[2].tags()).empty());
}

TEST_CASE("vm: a var list's element type comes from its assignments") {
    // `var primes = []` is List[Never] to the checker; every assignment gives it Ints, so the loop
    // variable's arithmetic is typed (MULI, MODI) and its register is never CLEARed.
    auto program = compile(
        "program p\n"
        "fn main() -> Int {\n"
        "  var primes = []\n"
        "  var total = 0\n"
        "  for n in range(50) if n >= 2 {\n"
        "    var isprime = true\n"
        "    for p in primes limit 50 {\n"
        "      if n % p == 0 {\n        isprime = false\n        break\n      }\n"
        "    }\n"
        "    if isprime {\n      primes = primes + [n]\n      total = total + n * n\n    }\n"
        "  }\n"
        "  var mixed = []\n"
        "  mixed = mixed + [1]\n"
        "  var sq = 0\n"
        "  for p in primes limit 50 {\n    sq = sq + p * p\n  }\n"
        "  return total + len(mixed) + sq\n"
        "}\n");
    CHECK(countOps(*program, Op::MODI) == 1);
    CHECK(countOps(*program, Op::MOD) == 0);
    CHECK(countOps(*program, Op::MUL) == 0);
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::Completed);
    CHECK(resultJson(run) == "20933");
}

TEST_CASE("vm: constant strings compare by identity, and equal constants are one object") {
    // The VM interns the constant pool's strings: two different interned strings are unequal
    // without comparing bytes. A forged file may hold the same string twice; both must still be
    // equal (the pool keeps one object per content), through IFEQ, EQ and JMPNEK alike.
    Constant same1{Constant::Kind::Str, 0, 0, "state"}, same2{Constant::Kind::Str, 0, 0, "state"};
    Constant other{Constant::Kind::Str, 0, 0, "stale"};
    for (uint16_t second : {1, 2}) {
        CAPTURE(second);
        auto program = forged({Instr::abx(Op::LOADK, 0, 0), Instr::abx(Op::LOADK, 1, second), Instr::abc(Op::IFEQ, 0, 1),
                               Instr::abx(Op::JMP, 0, 7), Instr::abc(Op::EQ, 2, 0, 1), Instr::abc(Op::JMPNEK, 0, second, 1),
                               Instr::abc(Op::RET, 2), Instr::abc(Op::LOADI, 2, 9), Instr::abc(Op::RET, 2)},
                              3, {same1, same2, other});
        Run run(program, {});
        REQUIRE(run.start(0, {}) == RunStatus::Completed);
        // Equal: IFEQ falls through, EQ is true, JMPNEK does not skip. Unequal: IFEQ takes its JMP.
        CHECK(resultJson(run) == (second == 1 ? "true" : "9"));
    }
}

TEST_CASE("vm: an expect in a test block fails with its message") {
    auto program = compile(
        "program p\nfn double(x: Int) -> Int {\n  return x * 2\n}\n"
        "fn main() -> Int {\n  return double(1)\n}\n"
        "test \"doubles\" {\n  expect double(2) == 4, \"two\"\n  expect double(3) == 7\n}\n");
    REQUIRE(program->module().tests.size() == 1);
    Run run(program, {});
    REQUIRE(run.start(program->module().tests[0].function, {}) == RunStatus::Failed);
    CHECK(run.failure().expectationFailed);
    CHECK(run.failure().error.message == "expectation failed: double(3) == 7");
    CHECK(run.failure().span.line == 10);
}

}  // namespace
