// See world.h.
#include "tests/difftest/world.h"

namespace remit::difftest {

namespace {

using json = nlohmann::json;

json intAnswer(Rng& rng) {
    static const std::vector<int64_t> pool = {0, 1, 2, 3, 5, 7, -1, -4, 10, 42, 100, 1000, -250,
                                              9223372036854775807, -9223372036854775807 - 1, 4611686018427387904};
    return rng.chance(80) ? json(rng.range(-3, 12)) : json(rng.pick(pool));
}

json floatAnswer(Rng& rng) {
    static const std::vector<double> pool = {0.5, 1.5, 2.0, -0.25, 3.0, 0.1, 2.675, 1e16, 1e-05, -7.5, 0.0, 1e300,
                                             -0.0, 5e-324, 1.7976931348623157e308, 9007199254740993.0, 0.30000000000000004};
    // An integer for a Float type is converted by whoever receives it.
    if (rng.chance(15)) return json(rng.range(-3, 9));
    return json(rng.pick(pool));
}

json answerOf(TypeRef type, Rng& rng, int depth) {
    switch (type->kind) {
        case TypeKind::Unit: return nullptr;
        case TypeKind::Bool: return rng.chance(50);
        case TypeKind::Int:
            // An integral float for an Int type is coerced (value_json.h).
            if (rng.chance(5)) return json(static_cast<double>(rng.range(-2, 9)));
            return intAnswer(rng);
        case TypeKind::Float: return floatAnswer(rng);
        case TypeKind::Str:
            if (!type->options.empty()) return rng.pick(type->options);
            if (rng.chance(3)) return "cr\r\nlf";  // no source literal can spell a \r
            return rng.pick(stringPool());
        case TypeKind::Enum: return rng.pick(type->options);
        case TypeKind::List: {
            int64_t max = type->max ? *type->max : 4;
            int64_t n = rng.range(0, std::min<int64_t>(max, depth > 1 ? 2 : 4));
            json out = json::array();
            for (int64_t i = 0; i < n; ++i) out.push_back(answerOf(type->elem, rng, depth + 1));
            return out;
        }
        case TypeKind::Record: {
            json out = json::object();
            for (const RecordFieldType& f : type->fields) out[f.name] = answerOf(f.type, rng, depth + 1);
            return out;
        }
        case TypeKind::Never: return nullptr;
    }
    return nullptr;
}

// An answer that does not fit `type`, broken at a random depth: a wrong kind, an enum value
// outside the union, a list over its bound, a missing or an extra record field.
json misfitOf(TypeRef type, Rng& rng) {
    switch (type->kind) {
        case TypeKind::List:
            if (type->max && rng.chance(40)) {
                json out = json::array();
                for (int64_t i = 0; i <= *type->max; ++i) out.push_back(answerOf(type->elem, rng, 2));
                return out;
            }
            if (rng.chance(50)) {
                json out = json::array({answerOf(type->elem, rng, 2)});
                out[0] = misfitOf(type->elem, rng);
                return out;
            }
            break;
        case TypeKind::Record: {
            json out = answerOf(type, rng, 1);
            unsigned how = static_cast<unsigned>(rng.below(3));
            if (how == 0 && !type->fields.empty()) out.erase(type->fields[rng.below(type->fields.size())].name);
            else if (how == 1) out["unexpected"] = 1;
            else if (!type->fields.empty()) {
                const RecordFieldType& f = type->fields[rng.below(type->fields.size())];
                out[f.name] = misfitOf(f.type, rng);
            }
            return out;
        }
        case TypeKind::Enum: return rng.chance(50) ? json("not-an-option") : json(7);
        case TypeKind::Int: return rng.chance(50) ? json(2.5) : json("12");
        case TypeKind::Float: return rng.chance(50) ? json("1.5") : json(true);
        case TypeKind::Str: return rng.chance(50) ? json(12) : json(nullptr);
        case TypeKind::Bool: return rng.chance(50) ? json(1) : json("true");
        case TypeKind::Unit: return json(0);
        default: break;
    }
    return json::array({"misfit"});
}

}  // namespace

uint64_t stableHash(std::string_view text, uint64_t seed) {
    uint64_t h = 0xCBF29CE484222325ull ^ (seed * 0x9E3779B97F4A7C15ull);
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001B3ull;
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

const std::vector<std::string>& stringPool() {
    static const std::vector<std::string> pool = {
        "a", "b", "c", "yes", "no", "refund", "spam", "", " x ", "hello world", "a,b,,c", "Straße", "ΣΑΣ ΟΔΟΣ",
        "ﬁne", "İstanbul", "日本語", "naïve café", "\u00a0pad\u2003", " 42 ", "-7", "1_000", "3.5", "٣", "1e3", "nan",
        "x\ty", "line\nbreak", "quote\"d", "back\\slash", "{brace}", "😀 emoji", "A-1001", "ok", "Ok", "OK",
        "#not a comment", "e\u0301", "ǅ", "ﬃ", "ΌΣΟΣ"};
    return pool;
}

WorldReply worldAnswer(uint64_t seed, std::string_view resource, bool isModel, const json& args, uint32_t attempt,
                       TypeRef type, double declaredCost) {
    // A world's temperament comes from its seed alone: some never fail, some fail often.
    Rng temper(stableHash("temper", seed));
    unsigned failPercent = static_cast<unsigned>(temper.pick(std::vector<uint64_t>{0, 8, 20, 45}));
    std::string key = std::string(resource) + "\n" + args.dump() + "\n" + std::to_string(attempt);
    Rng rng(stableHash(key, seed));
    WorldReply reply;
    if (rng.chance(6)) reply.costUsd = declaredCost * 3 + 0.01;  // an overrun
    else if (rng.chance(6)) reply.costUsd = 0.0;
    if (rng.chance(failPercent)) {
        reply.ok = false;
        reply.errorCode = rng.chance(70) ? "CapabilityFailed" : "Timeout";
        reply.message = "the world said no to " + std::string(resource);
        return reply;
    }
    // Models answer off-type more often than capabilities break their declared type.
    if (rng.chance(isModel ? failPercent / 2 + 3 : 2)) {
        reply.result = misfitOf(type, rng);
        return reply;
    }
    reply.result = answerOf(type, rng, 0);
    return reply;
}

}  // namespace remit::difftest
