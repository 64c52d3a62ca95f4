// The dispatch loop (docs/architecture.md "The one seam") and the Run of vm/run.h.
//
// Registers live on one stack allocated when the run starts: the verifier computed the most any
// chain of calls can need (Module::stackRegisters), since there is no recursion. A call's frame
// begins at the caller's argument window, so arguments are never copied.
//
// Budgets are charged where control can repeat: a back-edge (FORLOOP, or any backward jump a
// forged file might contain) charges the length of the code it jumps back over, and a call charges
// the callee's length, so `steps` is an upper bound on the instructions executed. Work inside an
// instruction that grows with its data — copying, scanning, building text in the heap, the
// builtins and the generic operations — is charged too, one step per kWorkBytesPerStep bytes
// (runtime/heap.h `work`), through the WorkMeter this run installs while it executes. The wall
// clock and the abort flag are read whenever kCheckSteps more steps have been charged, and at
// every batch of work, so time is checked by elapsed work: an abort or the wall limit takes effect
// within a bounded amount of it, however the work is spread over instructions.
//
// Labels: every value carries tags and provenance; the current control tags (the pc) are a
// TagSetId in the loop, saved in a register by PCENTER and restored by PCLEAVE, inherited by
// callees, and exposed at each host call.
#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <unordered_map>

#include "vm/run.h"
#include "runtime/builtins.h"
#include "runtime/ops.h"
#include "runtime/value_json.h"
#include "bytecode/rbc.h"

// The fast paths are the likely ones: GCC then lays the handlers out with them falling through and
// the generic operations and errors out of line.
#if defined(__GNUC__)
#define REMIT_LIKELY(x) __builtin_expect(!!(x), 1)
#define REMIT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define REMIT_LIKELY(x) (x)
#define REMIT_UNLIKELY(x) (x)
#endif

// The loop dispatches through computed goto (labels as values, a GNU extension that GCC and clang
// support); other compilers use a `switch`. Defining REMIT_VM_SWITCH takes the `switch` path with
// GCC or clang too, so that it can be built and tested where those are the only compilers.
#if defined(__GNUC__) && !defined(REMIT_VM_SWITCH)
#define REMIT_THREADED 1
#else
#define REMIT_THREADED 0
#endif

namespace remit {

// ---------------------------------------------------------------- LoadedProgram

LoadedProgram::LoadedProgram(std::unique_ptr<Module> module)
    : module_(std::move(module)), arena_(std::make_unique<TypeArena>()) {
    types_ = materializeTypes(*module_, *arena_);
}

uint32_t LoadedProgram::findFunction(std::string_view name) const {
    for (size_t i = 0; i < module_->functions.size(); ++i)
        if (module_->functions[i].name == name) return static_cast<uint32_t>(i);
    return kNoType;
}

// ---------------------------------------------------------------- the run

namespace {

// Steps between readings of the wall clock and the abort flag: a few tens of microseconds of
// instructions (reading the clock costs about 20 ns).
constexpr int64_t kCheckSteps = 1 << 14;

struct Frame {
    uint32_t function;
    uint32_t base;      // index of register 0 in the stack
    uint32_t returnPc;  // in the caller: the instruction after the CALL
    uint16_t dest;      // in the caller: the register receiving the result
    TagSetId callerPc;  // the caller's pc, restored on return
};

// The call stack. Its depth is bounded by the number of functions (there is no recursion), so it
// is allocated once and push/pop are plain index moves the compiler inlines into the loop.
class FrameStack {
public:
    void reserve(size_t n) { frames_.resize(n); }
    void push_back(const Frame& f) {
        if (depth_ == frames_.size()) frames_.resize(frames_.size() * 2 + 1);  // only a forged file gets here
        frames_[depth_++] = f;
    }
    void pop_back() { --depth_; }
    Frame& back() { return frames_[depth_ - 1]; }
    const Frame& back() const { return frames_[depth_ - 1]; }
    bool empty() const { return depth_ == 0; }
    void clear() { depth_ = 0; }

private:
    std::vector<Frame> frames_;
    size_t depth_ = 0;
};

// A GETFIELD's cached position: records of `shape` have the field at `slot` (no shape yet: null).
struct FieldCache {
    const RecordShape* shape;
    uint32_t slot;
};

// One instruction as the loop runs it (direct threading): the address of its handler beside the
// instruction, so that dispatch is one load and one indirect jump instead of reading the opcode
// and indexing the label table with it, and what the run keeps for that instruction: a jump's
// destination as an address (no `code + Bx` in the handler, and no need to keep `code` in a
// register), or a GETFIELD's cache. A run translates its module's verified code into these once,
// index for index, so a pc or a return pc is the same number as in the module's code. In the
// `switch` build (no computed goto) `handler` is unused.
struct ThreadedInstr {
    const void* handler;
    Instr ins;
    union {
        ThreadedInstr* target;  // the instructions whose B is a JumpBx operand: code + Bx
        FieldCache cache;       // GETFIELD
    };
};
static_assert(sizeof(ThreadedInstr) == 32);

}  // namespace

struct Run::Impl final : WorkMeter {
    std::shared_ptr<const LoadedProgram> program;
    const Module& module;
    VmLimits limits;
    Heap heap;
    std::vector<Value> constants;
    std::vector<Value> stack;
    FrameStack frames;
    std::vector<size_t> codeOffset;  // per function: its first entry in threaded
    std::vector<ThreadedInstr> threaded;  // every function's code, translated by execute() on its first call
    bool threadedReady = false;
    std::vector<const RecordShape*> shapes;  // module.shapes, interned in the heap

    RunStatus status = RunStatus::NotStarted;
    HostCall call;
    uint32_t callPc = 0;  // the CALLCAP/ASKMODEL instruction the run stopped at
    Value result;
    Value returning;  // RET's value between the callee's frame and the caller's register
    RunFailure failure;

    // Where execution continues on resume.
    uint32_t pc = 0;
    TagSetId pcTags = kNoTags;

    int64_t stepsLeft;
    // Steps charged so far are stepsStart - stepsLeft, plus what spendSteps charged beyond the
    // amount it subtracts (it clamps one batch): the hot back-edge updates one counter, not two.
    int64_t stepsStart;
    uint64_t stepsClamped = 0;
    int64_t checkAt;  // the limits are checked once stepsLeft is at or below this
    std::chrono::nanoseconds vmTime{0};
    std::chrono::steady_clock::time_point sliceStart;
    std::atomic<bool> abortRequested{false};

    Impl(std::shared_ptr<const LoadedProgram> p, VmLimits l)
        : program(std::move(p)), module(program->module()), limits(l), heap(l.maxMemory),
          stepsLeft(static_cast<int64_t>(std::min<uint64_t>(l.maxSteps, INT64_MAX))), stepsStart(stepsLeft),
          checkAt(std::max<int64_t>(stepsLeft - kCheckSteps, -1)) {}

    ~Impl() {
        // Values before the heap that owns their objects.
        call.args.clear();
        result = Value();
        returning = Value();
        stack.clear();
        constants.clear();
    }

    bool prepare();
    void thread(const void* const* labels);
    RunStatus execute();
    RunStatus fail(RuntimeError error, uint32_t function, uint32_t at);
    RunStatus failHere(RuntimeError error) {
        const Frame& f = frames.back();
        return fail(std::move(error), f.function, pc);
    }
    // Charges `steps`; false (with heap's error set) when a limit is reached. The clock and the
    // abort flag are read only once kCheckSteps more have been charged (checkAt is never below
    // -1, so the step limit itself is checked exactly).
    REMIT_ALWAYS_INLINE bool charge(uint64_t steps) {
        stepsLeft -= static_cast<int64_t>(steps);
        if (REMIT_LIKELY(stepsLeft > checkAt)) return true;
        return checkLimits();
    }
    bool checkLimits();
    // WorkMeter: a batch of the heap's work, while execute() runs. It checks every limit at once,
    // so a long operation is stopped between batches.
    bool spendSteps(uint64_t steps) override {
        uint64_t subtracted = std::min<uint64_t>(steps, INT64_MAX / 2);
        stepsLeft -= static_cast<int64_t>(subtracted);
        stepsClamped += steps - subtracted;
        return checkLimits();
    }
    RunStatus completed(Value v, uint32_t function);
    RunStatus stopAtHostCall(uint32_t siteIndex, Value* window);
};

bool Run::Impl::prepare() {
    // The register stack and the threaded code with its field caches are memory the run holds:
    // charge them.
    size_t totalCode = 0;
    codeOffset.reserve(module.functions.size());
    for (const Function& f : module.functions) {
        codeOffset.push_back(totalCode);
        totalCode += f.code.size();
    }
    size_t stackBytes = size_t(module.stackRegisters) * sizeof(Value);
    if (!heap.charge(stackBytes + totalCode * sizeof(ThreadedInstr))) return false;
    stack.resize(module.stackRegisters);
    threaded.resize(totalCode);
    frames.reserve(module.functions.size() + 1);
    shapes.reserve(module.shapes.size());
    for (const std::vector<std::string>& names : module.shapes)
        shapes.push_back(heap.recordShape(std::span<const std::string>(names)));
    constants.reserve(module.constants.size());
    // Equal strings share one interned object (a forged file may repeat a constant), so a match
    // on strings compares pointers (flatEqual).
    std::unordered_map<std::string_view, size_t> strings;
    for (const Constant& k : module.constants) {
        switch (k.kind) {
            case Constant::Kind::Int: constants.push_back(Value::integer(k.i)); break;
            case Constant::Kind::Float:
                if (!std::isfinite(k.f)) {
                    heap.fail(RuntimeError{DiagCode::R0101, "a constant is not a finite number", {}});
                    return false;
                }
                constants.push_back(Value::floating(k.f));
                break;
            case Constant::Kind::Str: {
                if (auto same = strings.find(k.s); same != strings.end()) {
                    constants.push_back(constants[same->second]);
                    break;
                }
                std::optional<Value> s = heap.makeStr(k.s);
                if (!s) return false;
                s->object()->interned = true;
                strings.emplace(k.s, constants.size());
                constants.push_back(std::move(*s));
                break;
            }
        }
    }
    return true;
}

// The labels exist only inside execute(), which passes its table on its first call (nullptr in the
// `switch` build). The code is the module's, which passed verifyModule (LoadedProgram's
// precondition): every opcode indexes the table in bounds, and the operands are the ones verified.
void Run::Impl::thread(const void* const* labels) {
    for (size_t f = 0; f < module.functions.size(); ++f) {
        const std::vector<Instr>& code = module.functions[f].code;
        ThreadedInstr* out = threaded.data() + codeOffset[f];
        for (size_t k = 0; k < code.size(); ++k) {
            const Instr& in = code[k];
            out[k].handler = labels ? labels[static_cast<uint8_t>(in.op)] : nullptr;
            out[k].ins = in;
            if (opInfo(in.op).b == Operand::JumpBx)
                out[k].target = out + in.bx();  // inside the function (verified)
            else
                out[k].cache = FieldCache{nullptr, 0};
        }
    }
    threadedReady = true;
}

RunStatus Run::Impl::fail(RuntimeError error, uint32_t function, uint32_t at) {
    failure.error = std::move(error);
    failure.function = function < module.functions.size() ? module.functions[function].name : "";
    if (function < module.functions.size() && at < module.functions[function].spans.size())
        failure.span = module.functions[function].spans[at];
    status = RunStatus::Failed;
    call.args.clear();
    // Release everything the program held, so its memory is back before the embedder reports.
    for (Value& v : stack) v = Value();
    frames.clear();
    return status;
}

RunStatus Run::Impl::completed(Value v, uint32_t function) {
    // The result must fit the result-size limit when written as JSON.
    if (!valueToJson(v, limits.maxResultBytes)) {
        Json details = {{"limit", "result_bytes"}, {"value", limits.maxResultBytes}};
        failure.error = RuntimeError{
            DiagCode::R0701, fmt::format("the result is larger than the limit of {} bytes", limits.maxResultBytes),
            std::move(details)};
        failure.function = module.functions[function].name;
        failure.span = module.functions[function].spans.back();
        status = RunStatus::Failed;
        return status;
    }
    result = std::move(v);
    status = RunStatus::Completed;
    for (Value& r : stack) r = Value();
    frames.clear();
    return status;
}

bool Run::Impl::checkLimits() {
    if (stepsLeft < 0) {
        heap.fail(RuntimeError{DiagCode::R0701,
                               fmt::format("the run exceeded its step limit of {} steps", limits.maxSteps),
                               {{"limit", "steps"}, {"value", limits.maxSteps}}});
        return false;
    }
    checkAt = std::max<int64_t>(stepsLeft - kCheckSteps, -1);
    if (abortRequested.load(std::memory_order_relaxed)) {
        heap.fail(RuntimeError{DiagCode::R0702, "the run was aborted by the host", {}});
        return false;
    }
    auto now = std::chrono::steady_clock::now();
    if (vmTime + (now - sliceStart) > std::chrono::milliseconds(limits.maxWallMs)) {
        heap.fail(RuntimeError{DiagCode::R0701,
                               fmt::format("the run exceeded its time limit of {} ms", limits.maxWallMs),
                               {{"limit", "wall_ms"}, {"value", limits.maxWallMs}}});
        return false;
    }
    return true;
}

RunStatus Run::Impl::stopAtHostCall(uint32_t siteIndex, Value* window) {
    const Site& site = module.sites[siteIndex];
    call = HostCall{};
    call.site = &site;
    if (site.kind == SiteKind::Agent)
        for (const Agent& a : module.agents)
            if (a.name == site.agent) call.agent = &a;
    call.askType = program->type(site.askType);
    call.args.reserve(site.argNames.size());
    for (size_t i = 0; i < site.argNames.size(); ++i) call.args.push_back(std::move(window[i]));
    call.pcTags = pcTags;
    call.attempt = 0;
    status = RunStatus::HostCall;
    return status;
}

// Numbers of which at least one is a Float: the result is a Float, the Int converted as Python does.
static bool isFloatPair(const Value& x, const Value& y) {
    return x.isNumber() && y.isNumber() && (x.kind() == ValueKind::Float || y.kind() == ValueKind::Float);
}
static bool isExactDouble(const Value& x) {
    constexpr int64_t kExact = int64_t(1) << 53;
    return x.kind() == ValueKind::Float || (x.kind() == ValueKind::Int && x.asInt() >= -kExact && x.asInt() <= kExact);
}

// Strings up to this long are compared in the fast path without charging their work.
constexpr size_t kFlatCompareBytes = 256;

// Equality of two unlabelled scalars or strings of the same kind: 1 or 0; -1 when the generic
// (structural, labelling) comparison is needed. Forced inline: GCC stopped inlining it into the
// dispatch loop once five handlers used it, and the call was 15% of a string `match`.
REMIT_ALWAYS_INLINE static int flatEqual(const Value& x, const Value& y) {
    // Same kind, and neither has tags or provenance: equal label words with nothing above the kind.
    if (x.labelWord() != y.labelWord() || (x.labelWord() >> 8) != 0) return -1;
    switch (x.kind()) {
        case ValueKind::Int: return x.asInt() == y.asInt();
        case ValueKind::Bool: return x.asBool() == y.asBool();
        case ValueKind::Str: {
            // Strings that came from the same constant share one object, and two different
            // constants differ.
            if (x.object() == y.object()) return 1;
            if (x.object()->interned && y.object()->interned) return 0;
            std::string_view a = x.asStr(), b = y.asStr();
            if (a.size() != b.size()) return 0;
            // A long comparison is work the generic path charges (valuesEqual with the heap).
            if (a.size() > kFlatCompareBytes) return -1;
            return a.empty() || (a[0] == b[0] && std::memcmp(a.data(), b.data(), a.size()) == 0);
        }
        case ValueKind::Unit: return 1;
        default: return -1;  // Float (-0.0, and 1 == 1.0 across kinds) and containers: the generic path
    }
}

// Kind checks for operands whose kind a forged .rbc could get wrong: the generic operations report
// them as R0101, the loop helpers below do it themselves.
static RuntimeError malformed(std::string_view what) {
    return RuntimeError{DiagCode::R0101, fmt::format("malformed bytecode: {}", what), {}};
}

#if REMIT_THREADED
// Labels as values (computed goto) are a GNU extension, which GCC and clang both support.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
RunStatus Run::Impl::execute() {
    sliceStart = std::chrono::steady_clock::now();
    // The heap's work is charged to this run only while it executes: converting inputs and host
    // results happens outside the VM's time.
    heap.setWorkMeter(this);
    struct SliceTimer {
        Impl& run;
        ~SliceTimer() {
            run.heap.setWorkMeter(nullptr);
            run.vmTime += std::chrono::steady_clock::now() - run.sliceStart;
        }
    } timer{*this};

#if REMIT_THREADED
    static const void* const kLabels[] = {
#define OPCODE(name, a, b, c, window, effect) &&op_##name,
#include "bytecode/opcodes.def"
#undef OPCODE
    };
    static_assert(sizeof(kLabels) / sizeof(kLabels[0]) == kOpCount);
    if (REMIT_UNLIKELY(!threadedReady)) thread(kLabels);
#else
    if (!threadedReady) thread(nullptr);
#endif

    const Function* fn = &module.functions[frames.back().function];
    ThreadedInstr* code = threaded.data() + codeOffset[frames.back().function];
    ThreadedInstr* ip = code + pc;
    Value* R = stack.data() + frames.back().base;
    TagSetId pcT = pcTags;
    // The instruction being run is the one before ip: its fields are read from the code where a
    // handler needs them rather than copied into locals at dispatch, which left GCC keeping the
    // opcode in a register and spilling ip and operand A to the stack in every handler.
#define INS (ip[-1].ins)

    // Leaves the loop with a runtime error at the current instruction.
#define FAIL_WITH(err)                          \
    do {                                        \
        pc = static_cast<uint32_t>(ip - 1 - code); \
        return failHere(err);                   \
    } while (0)
#define FAIL_HEAP() FAIL_WITH(heap.takeError())
#define CHECK(opt)               \
    do {                         \
        if (REMIT_UNLIKELY(!(opt))) FAIL_HEAP(); \
    } while (0)
#define SET_FROM(reg, opt)            \
    do {                              \
        auto result_ = (opt);         \
        if (REMIT_UNLIKELY(!result_)) FAIL_HEAP(); \
        (reg) = std::move(*result_);  \
    } while (0)
// out = a ∪ b without the heap's optional (whose flag byte stalls store forwarding on this hot path).
#define UNITE_TAGS(out, a, b)                              \
    do {                                                   \
        TagSetId a_ = (a), b_ = (b);                       \
        if (b_ == kNoTags || a_ == b_) {                   \
            (out) = a_;                                    \
        } else if (a_ == kNoTags) {                        \
            (out) = b_;                                    \
        } else {                                           \
            std::optional<TagSetId> t_ = heap.uniteTags(a_, b_); \
            if (!t_) FAIL_HEAP();                          \
            (out) = *t_;                                   \
        }                                                  \
    } while (0)
// Both values of `kind`, with no tags and no provenance: one comparison of each label word.
#define BOTH_UNLABELLED(x, y, kind) \
    ((x).labelWord() == Value::unlabelled(kind) && (y).labelWord() == Value::unlabelled(kind))
// Neither has tags or provenance (whatever the kinds): nothing above the kind in either label word.
#define UNTAGGED2(x, y) ((((x).labelWord() | (y).labelWord()) >> 8) == 0)

#if REMIT_THREADED
#define DISPATCH()                   \
    do {                             \
        goto*(ip++)->handler;        \
    } while (0)
#define CASE(name) op_##name:
    DISPATCH();
#else
#define DISPATCH() goto dispatch
#define CASE(name) case Op::name:
dispatch:
    switch ((ip++)->ins.op) {
#endif

    CASE(LOADK) {
        R[INS.a] = constants[INS.bx()];
        DISPATCH();
    }
    CASE(LOADI) {
        R[INS.a] = Value::integer(INS.b);
        DISPATCH();
    }
    CASE(LOADBOOL) {
        R[INS.a] = Value::boolean(INS.b != 0);
        DISPATCH();
    }
    CASE(LOADUNIT) {
        R[INS.a] = Value();
        DISPATCH();
    }
    CASE(MOVE) {
        R[INS.a] = R[INS.b];
        DISPATCH();
    }
    CASE(CLEAR) {
        for (uint32_t k = 0; k < INS.b; ++k) R[INS.a + k] = Value();
        DISPATCH();
    }

    // Arithmetic. Every form tries the unlabelled fast paths first — Int with Int (checked for
    // overflow), then numbers with a Float result — and otherwise takes the generic operation in
    // runtime/ops.h, which labels the result or reports the error. The typed opcodes the compiler
    // picks (ADDI, ADDF, ...) order the checks for the type it proved; a forged operand only ever
    // reaches the generic path.
#define ARITH_INT(x, y, builtin)                                                                        \
    if (REMIT_LIKELY(BOTH_UNLABELLED(x, y, ValueKind::Int))) {                                           \
        int64_t out_;                                                                                    \
        if (REMIT_LIKELY(!builtin(x.asInt(), y.asInt(), &out_))) {                                                   \
            R[INS.a] = Value::integer(out_);                                                               \
            DISPATCH();                                                                                  \
        }                                                                                                \
    }
// An unlabelled Float result: stored and dispatched when finite; otherwise the handler goes on to
// the generic operation, which reports the error.
#define STORE_IF_FINITE(out)                       \
    if (REMIT_LIKELY(std::isfinite(out))) {        \
        R[INS.a] = Value::floating(out);           \
        DISPATCH();                                \
    }
// Two unlabelled Floats read as Floats: through asNumber() GCC kept a test of the kind it had just
// compared (three instructions in ADDF). A mixed pair converts its Int.
#define ARITH_FLOAT(x, y, op)                                          \
    if (REMIT_LIKELY(BOTH_UNLABELLED(x, y, ValueKind::Float))) {       \
        double out_ = x.asFloat() op y.asFloat();                      \
        STORE_IF_FINITE(out_)                                          \
    } else if (isFloatPair(x, y) && UNTAGGED2(x, y)) {                 \
        double out_ = x.asNumber() op y.asNumber();                    \
        STORE_IF_FINITE(out_)                                          \
    }
#define ARITH(name, intFirst, builtin, op, generic)                                                      \
    CASE(name) {                                                                                         \
        const Value& x = R[INS.b];                                                                         \
        const Value& y = R[INS.c];                                                                         \
        if (intFirst) {                                                                                  \
            ARITH_INT(x, y, builtin)                                                                     \
            ARITH_FLOAT(x, y, op)                                                                        \
        } else {                                                                                         \
            ARITH_FLOAT(x, y, op)                                                                        \
            ARITH_INT(x, y, builtin)                                                                     \
        }                                                                                                \
        SET_FROM(R[INS.a], generic(heap, x, y));                                                           \
        DISPATCH();                                                                                      \
    }
    ARITH(ADD, true, __builtin_add_overflow, +, add)
    ARITH(ADDI, true, __builtin_add_overflow, +, add)
    ARITH(ADDF, false, __builtin_add_overflow, +, add)
    ARITH(SUB, true, __builtin_sub_overflow, -, subtract)
    ARITH(SUBI, true, __builtin_sub_overflow, -, subtract)
    ARITH(SUBF, false, __builtin_sub_overflow, -, subtract)
    ARITH(MUL, true, __builtin_mul_overflow, *, multiply)
    ARITH(MULI, true, __builtin_mul_overflow, *, multiply)
    ARITH(MULF, false, __builtin_mul_overflow, *, multiply)
#undef ARITH
#undef ARITH_INT
#undef ARITH_FLOAT
    CASE(MOD)
    CASE(MODI) {
        const Value& x = R[INS.b];
        const Value& y = R[INS.c];
        if (BOTH_UNLABELLED(x, y, ValueKind::Int) && y.asInt() > 0 && x.asInt() >= 0) {
            R[INS.a] = Value::integer(x.asInt() % y.asInt());  // the common case needs no flooring
            DISPATCH();
        }
        if (BOTH_UNLABELLED(x, y, ValueKind::Int) && y.asInt() != 0) {
            R[INS.a] = Value::integer(floorModInt(x.asInt(), y.asInt()));
            DISPATCH();
        }
        SET_FROM(R[INS.a], modulo(heap, x, y));
        DISPATCH();
    }
    CASE(DIV)
    CASE(DIVF) {
        // Doubles divide exactly like Python's true division when both operands convert exactly
        // (Floats, and Ints within 2^53); anything else goes through ops.h's correctly rounded path.
        const Value& x = R[INS.b];
        const Value& y = R[INS.c];
        // A zero divisor goes on to the generic operation, which reports it.
        if (REMIT_LIKELY(BOTH_UNLABELLED(x, y, ValueKind::Float))) {  // DIVF's case, without asNumber's kind tests
            if (REMIT_LIKELY(y.asFloat() != 0)) {
                double out = x.asFloat() / y.asFloat();
                STORE_IF_FINITE(out)
            }
        } else if (isExactDouble(x) && isExactDouble(y) && UNTAGGED2(x, y) && y.asNumber() != 0) {
            double out = x.asNumber() / y.asNumber();
            STORE_IF_FINITE(out)
        }
        SET_FROM(R[INS.a], divide(heap, x, y));
        DISPATCH();
    }
#undef STORE_IF_FINITE
    CASE(NEG) {
        SET_FROM(R[INS.a], negate(heap, R[INS.b]));
        DISPATCH();
    }
    CASE(NOT) {
        const Value& x = R[INS.b];
        if (x.labelWord() == Value::unlabelled(ValueKind::Bool)) {
            R[INS.a] = Value::boolean(!x.asBool());
            DISPATCH();
        }
        SET_FROM(R[INS.a], logicalNot(heap, x));
        DISPATCH();
    }
    CASE(APPEND) {
        if (R[INS.a].kind() != ValueKind::List) FAIL_WITH(malformed("APPEND to a value that is not a list"));
        CHECK(heap.appendInPlace(R[INS.a], R[INS.b]));
        DISPATCH();
    }
    CASE(CONCATTO) {
        ValueKind k = R[INS.a].kind();
        if ((k != ValueKind::List && k != ValueKind::Str) || R[INS.b].kind() != k)
            FAIL_WITH(malformed("CONCATTO needs two lists or two strings"));
        CHECK(heap.concatInPlace(R[INS.a], R[INS.b]));
        DISPATCH();
    }

    // Comparisons: the same scheme. Int with Float goes to the generic path, which compares
    // them exactly (as Python does), not through a conversion.
#define COMPARE(name, op, generic)                                                                       \
    CASE(name) {                                                                                         \
        const Value& x = R[INS.b];                                                                         \
        const Value& y = R[INS.c];                                                                         \
        if (BOTH_UNLABELLED(x, y, ValueKind::Int)) {                                                     \
            R[INS.a] = Value::boolean(x.asInt() op y.asInt());                                             \
            DISPATCH();                                                                                  \
        }                                                                                                \
        if (BOTH_UNLABELLED(x, y, ValueKind::Float)) {                                                   \
            R[INS.a] = Value::boolean(x.asFloat() op y.asFloat());                                         \
            DISPATCH();                                                                                  \
        }                                                                                                \
        SET_FROM(R[INS.a], generic(heap, x, y));                                                           \
        DISPATCH();                                                                                      \
    }
    COMPARE(LT, <, lessThan)
    COMPARE(LTI, <, lessThan)
    COMPARE(LTF, <, lessThan)
    COMPARE(LE, <=, lessEqual)
    COMPARE(LEI, <=, lessEqual)
    COMPARE(LEF, <=, lessEqual)
    COMPARE(EQI, ==, equals)
#undef COMPARE
    // == and != label with deep tags, so the fast path needs values with no labels inside either.
    CASE(EQ) {
        const Value& x = R[INS.b];
        const Value& y = R[INS.c];
        if (int eq = flatEqual(x, y); eq >= 0) {
            R[INS.a] = Value::boolean(eq == 1);
            DISPATCH();
        }
        SET_FROM(R[INS.a], equals(heap, x, y));
        DISPATCH();
    }
    CASE(NE) {
        const Value& x = R[INS.b];
        const Value& y = R[INS.c];
        if (int eq = flatEqual(x, y); eq >= 0) {
            R[INS.a] = Value::boolean(eq == 0);
            DISPATCH();
        }
        SET_FROM(R[INS.a], notEquals(heap, x, y));
        DISPATCH();
    }
    CASE(IN) {
        SET_FROM(R[INS.a], memberOf(heap, R[INS.b], R[INS.c]));
        DISPATCH();
    }


    // A backward jump is a back-edge: it charges the code it jumps back over.
#define JUMP_TO(dest)                                                      \
    do {                                                                   \
        ThreadedInstr* to_ = (dest);                                       \
        if (to_ < ip) {                                                    \
            if (!charge(static_cast<uint64_t>(ip - to_))) FAIL_HEAP();     \
        }                                                                  \
        ip = to_;                                                          \
    } while (0)
    CASE(JMP) {
        JUMP_TO(ip[-1].target);
        DISPATCH();
    }
    CASE(JMPIF) {
        const Value& c = R[INS.a];
        if (c.kind() != ValueKind::Bool) FAIL_WITH(malformed("a condition that is not a Bool"));
        if (c.asBool()) JUMP_TO(ip[-1].target);
        DISPATCH();
    }
    CASE(JMPIFNOT) {
        const Value& c = R[INS.a];
        if (c.kind() != ValueKind::Bool) FAIL_WITH(malformed("a condition that is not a Bool"));
        if (!c.asBool()) JUMP_TO(ip[-1].target);
        DISPATCH();
    }
    CASE(JMPNEK) {
        // Forward only (the verifier checks the distance), so it never charges steps.
        const Value& x = R[INS.a];
        const Value& k = constants[INS.b];
        int eq = flatEqual(x, k);
        if (eq < 0) {
            std::optional<bool> equal = valuesEqual(heap, x, k);  // charges its work
            if (!equal) FAIL_HEAP();
            eq = *equal ? 1 : 0;
        }
        if (eq == 0) ip += INS.c;
        DISPATCH();
    }
    CASE(FORPREP) {
        Value* w = R + INS.a;
        if (w[1].kind() != ValueKind::Int || w[2].kind() != ValueKind::Int)
            FAIL_WITH(malformed("a loop counter that is not an Int"));
        int64_t end = w[2].asInt();
        if (w[0].kind() == ValueKind::List)
            end = std::min<int64_t>(end, static_cast<int64_t>(w[0].asList().items.size()));
        else if (w[0].kind() != ValueKind::Unit)
            FAIL_WITH(malformed("a loop over a value that is not a list"));
        w[2] = Value::integer(end);
        if (w[1].asInt() >= end) JUMP_TO(ip[-1].target);
        DISPATCH();
    }
    CASE(FORLOOP) {
        // An increment that would overflow is as malformed as a counter that is not an Int.
        Value* w = R + INS.a;
        int64_t next;
        if (REMIT_UNLIKELY(w[1].kind() != ValueKind::Int || w[2].kind() != ValueKind::Int ||
                           __builtin_add_overflow(w[1].asInt(), int64_t{1}, &next)))
            FAIL_WITH(malformed("a loop counter that is not an Int"));
        w[1] = Value::integer(next);
        if (next < w[2].asInt()) JUMP_TO(ip[-1].target);
        DISPATCH();
    }
    CASE(FORITEM) {
        const Value* w = R + INS.b;
        // An unlabelled list at an index in range (one label word, one unsigned comparison): the
        // element as it is; the checks and the labelled case below otherwise.
        if (REMIT_LIKELY(w[0].labelWord() == Value::unlabelled(ValueKind::List) && w[1].kind() == ValueKind::Int)) {
            const std::vector<Value>& items = w[0].asList().items;
            uint64_t at = static_cast<uint64_t>(w[1].asInt());
            if (REMIT_LIKELY(at < items.size())) {
                R[INS.a] = items[at];
                DISPATCH();
            }
        }
        if (w[0].kind() != ValueKind::List || w[1].kind() != ValueKind::Int)
            FAIL_WITH(malformed("FORITEM outside a loop over a list"));
        const ListObject& list = w[0].asList();
        int64_t index = w[1].asInt();
        if (index < 0 || static_cast<uint64_t>(index) >= list.items.size())
            FAIL_WITH(malformed("a loop index outside its list"));
        const Value& item = list.items[static_cast<size_t>(index)];
        if ((w[0].labelWord() >> 8) == 0) {
            R[INS.a] = item;
        } else {
            // The loop variable is read out of the list: it carries the list's labels too.
            TagSetId t;
            UNITE_TAGS(t, item.tags(), w[0].tags());
            std::optional<ProvId> p = heap.uniteProv(item.prov(), w[0].prov());
            if (!p) FAIL_HEAP();
            R[INS.a] = item.withLabels(t, *p);
        }
        DISPATCH();
    }
    CASE(CLAMPK) {
        Value& v = R[INS.a];
        const Value& k = constants[INS.bx()];
        if (v.kind() != ValueKind::Int || k.kind() != ValueKind::Int) FAIL_WITH(malformed("CLAMPK on a non-Int"));
        if (k.asInt() < v.asInt()) v = Value::integer(std::max<int64_t>(0, k.asInt()));
        DISPATCH();
    }

    CASE(NEWLIST) {
        Value* w = R + INS.b;
        SET_FROM(R[INS.a], heap.makeList(std::span<const Value>(w, INS.c)));
        for (uint32_t k = 0; k < INS.c; ++k) w[k] = Value();
        DISPATCH();
    }
    CASE(NEWRECORD) {
        // The module's shapes were interned once in prepare(): no per-record lookup by names.
        const RecordShape* shape = shapes[INS.c];
        Value* w = R + INS.b;
        SET_FROM(R[INS.a], heap.makeRecord(shape, std::span<const Value>(w, shape->names.size())));
        for (size_t k = 0; k < shape->names.size(); ++k) w[k] = Value();
        DISPATCH();
    }
    CASE(INTERP) {
        Value* w = R + INS.b;
        SET_FROM(R[INS.a], interpolate(heap, std::span<const Value>(w, INS.c)));
        for (uint32_t k = 0; k < INS.c; ++k) w[k] = Value();
        DISPATCH();
    }
    CASE(INDEX) {
        // An unlabelled list at an unlabelled Int in range: the element as it is (indexList would
        // add nothing to its labels); anything else, with its errors, through indexList.
        const Value& list = R[INS.b];
        const Value& index = R[INS.c];
        if (list.labelWord() == Value::unlabelled(ValueKind::List) &&
            index.labelWord() == Value::unlabelled(ValueKind::Int)) {
            const std::vector<Value>& items = list.asList().items;
            uint64_t at = static_cast<uint64_t>(index.asInt());
            if (at < items.size()) {
                R[INS.a] = items[at];
                DISPATCH();
            }
        }
        SET_FROM(R[INS.a], indexList(heap, list, index));
        DISPATCH();
    }
    CASE(GETFIELD) {
        const Value& rec = R[INS.b];
        if (rec.kind() == ValueKind::Record) {
            FieldCache& fc = ip[-1].cache;
            const RecordObject& obj = rec.asRecord();
            if (fc.shape != obj.shape) {
                std::optional<size_t> slot = obj.shape->indexOf(constants[INS.c].asStr());
                if (slot) fc = FieldCache{obj.shape, static_cast<uint32_t>(*slot)};
            }
            if (fc.shape == obj.shape) {
                // An unlabelled record's field keeps its own labels: no union to make.
                if ((rec.labelWord() >> 8) == 0 && fc.slot < obj.values.size()) {
                    R[INS.a] = obj.values[fc.slot];
                    DISPATCH();
                }
                SET_FROM(R[INS.a], getFieldAt(heap, rec, fc.slot));
                DISPATCH();
            }
        }
        SET_FROM(R[INS.a], getField(heap, rec, constants[INS.c].asStr()));
        DISPATCH();
    }
    CASE(CHECKMAX) {
        const Value& v = R[INS.a];
        int64_t bound = constants[INS.bx()].asInt();
        if (v.kind() == ValueKind::List && static_cast<int64_t>(v.asList().items.size()) > bound) {
            FAIL_WITH((RuntimeError{
                DiagCode::R0113,
                fmt::format("list has {} items but its declared bound is max {}", v.asList().items.size(), bound),
                {{"limit", bound}, {"length", v.asList().items.size()}}}));
        }
        DISPATCH();
    }

    CASE(CALL) {
        uint16_t index = INS.b;
        const Function& callee = module.functions[index];
        if (!charge(callee.code.size())) FAIL_HEAP();
        uint32_t base = static_cast<uint32_t>((R - stack.data()) + INS.c);
        if (size_t(base) + callee.numRegs > stack.size()) FAIL_WITH(malformed("call frames exceed the stack"));
        frames.push_back(Frame{index, base, static_cast<uint32_t>(ip - code), INS.a, pcT});
        fn = &callee;
        code = threaded.data() + codeOffset[index];
        ip = code;  // INS is not the CALL any more
        R = stack.data() + base;
        DISPATCH();
    }
    CASE(BUILTIN) {
        uint16_t argc = kBuiltins[INS.c].argc;
        Value* w = R + INS.b;
        SET_FROM(R[INS.a], callBuiltin(heap, static_cast<BuiltinId>(INS.c), std::span<const Value>(w, argc)));
        for (uint16_t k = 0; k < argc; ++k) w[k] = Value();
        DISPATCH();
    }
    CASE(CALLCAP)
    CASE(ASKMODEL) {
        pc = static_cast<uint32_t>(ip - 1 - code);
        callPc = pc;
        pcTags = pcT;
        return stopAtHostCall(INS.c, R + INS.b);
    }
    CASE(RET)
    CASE(RETUNIT) {
        // The value travels in a member, not a local: an indirect goto may not leave the scope of
        // a local with a destructor (clang rejects it; GCC would skip the destructor).
        Value& out = returning;
        out = Value();
        if (INS.op == Op::RET) {
            out = std::move(R[INS.a]);
            if (pcT != kNoTags) {
                TagSetId t;
                UNITE_TAGS(t, out.tags(), pcT);
                out.setTags(t);
            }
        }
        Frame done = frames.back();
        for (uint32_t k = 0; k < fn->numRegs; ++k) R[k] = Value();
        frames.pop_back();
        if (frames.empty()) return completed(std::move(out), done.function);
        const Frame& caller = frames.back();
        fn = &module.functions[caller.function];
        code = threaded.data() + codeOffset[caller.function];
        ip = code + done.returnPc;
        R = stack.data() + caller.base;
        pcT = done.callerPc;
        R[done.dest] = std::move(out);
        DISPATCH();
    }

    CASE(PCENTER) {
        TagSetId saved = pcT;
        UNITE_TAGS(pcT, saved, R[INS.b].tags());
        R[INS.a] = Value::unit(saved);
        DISPATCH();
    }
    CASE(PCLEAVE) {
        pcT = R[INS.a].tags();
        DISPATCH();
    }
    CASE(ADDLABELS) {
        Value& into = R[INS.a];
        const Value& from = R[INS.b];
        TagSetId t;
        UNITE_TAGS(t, into.tags(), from.tags());
        into.setTags(t);
        if (from.prov() != kNoProv && from.prov() != into.prov()) {
            std::optional<ProvId> p = heap.uniteProv(into.prov(), from.prov());
            if (!p) FAIL_HEAP();
            into.setProv(*p);
        }
        DISPATCH();
    }
    CASE(TAINTPC) {
        if (pcT != kNoTags) {
            TagSetId t;
            UNITE_TAGS(t, R[INS.a].tags(), pcT);
            R[INS.a].setTags(t);
        }
        DISPATCH();
    }
    CASE(EXPECT) {
        const Value& c = R[INS.a];
        if (c.kind() != ValueKind::Bool) FAIL_WITH(malformed("an expectation that is not a Bool"));
        if (!c.asBool()) {
            pc = static_cast<uint32_t>(ip - 1 - code);
            failHere(RuntimeError{DiagCode::R0101, std::string(constants[INS.bx()].asStr()), {}});
            failure.expectationFailed = true;
            return status;
        }
        DISPATCH();
    }

    // Fused compare-and-branch: the comparison as LT/LE/EQ/NE compute it (fast paths for unlabelled
    // values, else the generic operation with its errors), then either skip the JMP that follows
    // (the verifier guarantees it is there) or go where it points, without dispatching it.
#define BRANCH_ON(holds)             \
    do {                             \
        if (holds) {                 \
            ++ip;                    \
        } else {                     \
            JUMP_TO(ip->target);     \
        }                            \
        DISPATCH();                  \
    } while (0)
#define BRANCH_ORDER(name, op, generic)                                                                  \
    CASE(name) {                                                                                         \
        const Value& x = R[INS.a];                                                                         \
        const Value& y = R[INS.b];                                                                         \
        if (BOTH_UNLABELLED(x, y, ValueKind::Int)) BRANCH_ON(x.asInt() op y.asInt());                    \
        if (BOTH_UNLABELLED(x, y, ValueKind::Float)) BRANCH_ON(x.asFloat() op y.asFloat());              \
        bool holds_;                                                                                     \
        {                                                                                                \
            std::optional<Value> r_ = generic(heap, x, y);                                               \
            if (!r_) FAIL_HEAP();                                                                        \
            holds_ = r_->asBool();                                                                       \
        }                                                                                                \
        BRANCH_ON(holds_);                                                                               \
    }
    BRANCH_ORDER(IFLT, <, lessThan)
    BRANCH_ORDER(IFLE, <=, lessEqual)
#undef BRANCH_ORDER
    CASE(IFEQ)
    CASE(IFNE) {
        const Value& x = R[INS.a];
        const Value& y = R[INS.b];
        int eq = flatEqual(x, y);
        if (eq < 0) {
            std::optional<Value> r_ = equals(heap, x, y);
            if (!r_) FAIL_HEAP();
            eq = r_->asBool() ? 1 : 0;
        }
        BRANCH_ON((eq == 1) == (INS.op == Op::IFEQ));
    }
    // A register against a small Int literal, the immediate (docs/bytecode.md "Immediate operands"):
    // an unlabelled Int takes the fast path; anything else the generic comparison with an unlabelled
    // Int(B) where the literal stood in the source (first for > and >=, which compare B < R[A]).
#define BRANCH_IMM(name, op, generic, literalFirst)                                                     \
    CASE(name) {                                                                                         \
        const Value& x = R[INS.a];                                                                       \
        int64_t k_ = INS.b;                                                                              \
        if (REMIT_LIKELY(x.labelWord() == Value::unlabelled(ValueKind::Int))) BRANCH_ON(x.asInt() op k_); \
        bool holds_;                                                                                     \
        {                                                                                                \
            Value kv_ = Value::integer(k_);                                                              \
            std::optional<Value> r_ = (literalFirst) ? generic(heap, kv_, x) : generic(heap, x, kv_);    \
            if (!r_) FAIL_HEAP();                                                                        \
            holds_ = r_->asBool();                                                                       \
        }                                                                                                \
        BRANCH_ON(holds_);                                                                               \
    }
    BRANCH_IMM(IFEQIMM, ==, equals, false)
    BRANCH_IMM(IFNEIMM, !=, notEquals, false)
    BRANCH_IMM(IFLTIMM, <, lessThan, false)
    BRANCH_IMM(IFLEIMM, <=, lessEqual, false)
    BRANCH_IMM(IFGTIMM, >, lessThan, true)
    BRANCH_IMM(IFGEIMM, >=, lessEqual, true)
#undef BRANCH_IMM
#undef BRANCH_ON

    // R[B] + Int(C), R[B] - Int(C): one label word to test; the generic operation otherwise (a
    // labelled or non-Int operand, an overflow) with an unlabelled Int(C) as the right operand.
#define ARITH_IMM(name, builtin, generic)                                                                \
    CASE(name) {                                                                                         \
        const Value& x = R[INS.b];                                                                       \
        int64_t out_;                                                                                    \
        if (REMIT_LIKELY(x.labelWord() == Value::unlabelled(ValueKind::Int)) &&                          \
            REMIT_LIKELY(!builtin(x.asInt(), int64_t{INS.c}, &out_))) {                                  \
            R[INS.a] = Value::integer(out_);                                                             \
            DISPATCH();                                                                                  \
        }                                                                                                \
        SET_FROM(R[INS.a], generic(heap, x, Value::integer(INS.c)));                                     \
        DISPATCH();                                                                                      \
    }
    ARITH_IMM(ADDIMM, __builtin_add_overflow, add)
    ARITH_IMM(SUBIMM, __builtin_sub_overflow, subtract)
#undef ARITH_IMM

#if REMIT_THREADED
    __builtin_unreachable();
#else
    }
    return failHere(malformed("unknown opcode"));
#endif
#undef FAIL_WITH
#undef FAIL_HEAP
#undef CHECK
#undef SET_FROM
#undef UNTAGGED2
#undef BOTH_UNLABELLED
#undef UNITE_TAGS
#undef DISPATCH
#undef CASE
#undef JUMP_TO
#undef INS
}
#if REMIT_THREADED
#pragma GCC diagnostic pop
#endif

// ---------------------------------------------------------------- Run

Run::Run(std::shared_ptr<const LoadedProgram> program, VmLimits limits)
    : impl_(std::make_unique<Impl>(std::move(program), limits)) {}
Run::~Run() = default;

const LoadedProgram& Run::program() const { return *impl_->program; }
Heap& Run::heap() { return impl_->heap; }
RunStatus Run::status() const { return impl_->status; }
const HostCall& Run::hostCall() const { return impl_->call; }
const Value& Run::result() const { return impl_->result; }
const RunFailure& Run::failure() const { return impl_->failure; }
void Run::requestAbort() { impl_->abortRequested.store(true, std::memory_order_relaxed); }
uint64_t Run::stepsUsed() const {
    return static_cast<uint64_t>(impl_->stepsStart - impl_->stepsLeft) + impl_->stepsClamped;
}
std::chrono::nanoseconds Run::vmTime() const { return impl_->vmTime; }

RunStatus Run::start(uint32_t function, std::vector<Value> args) {
    Impl& r = *impl_;
    if (r.status != RunStatus::NotStarted) return r.status;
    const Module& m = r.module;
    if (function >= m.functions.size())
        return r.fail(RuntimeError{DiagCode::R0101, "the program has no such function to run", {}}, function, 0);
    const Function& fn = m.functions[function];
    if (args.size() != fn.paramNames.size())
        return r.fail(RuntimeError{DiagCode::R0101,
                                   fmt::format("'{}' takes {} argument(s), got {}", fn.name, fn.paramNames.size(),
                                               args.size()),
                                   {}},
                      function, 0);
    if (!r.prepare()) return r.fail(r.heap.takeError(), function, 0);
    r.frames.push_back(Frame{function, 0, 0, 0, kNoTags});
    for (size_t k = 0; k < args.size(); ++k) r.stack[k] = std::move(args[k]);
    r.pc = 0;
    r.pcTags = kNoTags;
    r.sliceStart = std::chrono::steady_clock::now();  // a long entry function reads the clock here
    if (!r.charge(fn.code.size())) return r.fail(r.heap.takeError(), function, 0);
    return r.execute();
}

RunStatus Run::resumeWithResult(Value value) {
    Impl& r = *impl_;
    if (r.status != RunStatus::HostCall) return r.status;
    const Frame& f = r.frames.back();
    const Instr& instr = r.module.functions[f.function].code[r.callPc];
    r.stack[f.base + instr.a] = std::move(value);
    r.call.args.clear();
    r.pc = r.callPc + 1;
    return r.execute();
}

bool Run::willFallBack(bool operational) const {
    const Impl& r = *impl_;
    if (r.status != RunStatus::HostCall || !operational) return false;
    return r.call.attempt >= r.call.site->retry && r.call.site->hasFallback;
}

RunStatus Run::resumeWithError(RuntimeError error, bool operational) {
    Impl& r = *impl_;
    if (r.status != RunStatus::HostCall) return r.status;
    const Frame& f = r.frames.back();
    if (operational && r.call.attempt < r.call.site->retry) {
        ++r.call.attempt;  // the same call again, with the same arguments
        return r.status;
    }
    if (operational && r.call.site->hasFallback) {
        r.call.args.clear();
        r.pc = r.callPc + 2;  // past the JMP that skips the fallback's code
        return r.execute();
    }
    return r.fail(std::move(error), f.function, r.callPc);
}

}  // namespace remit
