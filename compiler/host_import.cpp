// Drafting a host interface from JSON Schema operations: see host_import.h and docs/import.md.
#include "compiler/host_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "compiler/checker.h"
#include "compiler/formatter.h"
#include "compiler/parser.h"
#include "compiler/token.h"
#include "runtime/imported_names.h"
#include "runtime/source.h"

namespace remit {

using ast::TypeExpr;
using ast::TypePtr;

namespace {

// Deeper schemas are refused (and no Remit type nests that deep in practice).
constexpr int kMaxSchemaDepth = 64;
// A description becomes at most this many comment lines of at most this many columns.
constexpr size_t kMaxDescriptionLines = 12;
constexpr size_t kCommentWidth = 96;

const std::set<std::string, std::less<>>& builtinTypeNames() {
    static const std::set<std::string, std::less<>> names = {"Int", "Float", "Bool", "Str", "Unit", "List"};
    return names;
}

bool isFieldName(std::string_view name) {
    if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
    return identifierFrom(name) == name;
}

// A JSON Schema's kind in a word, for the comments that list what was left out.
std::string schemaWord(const Json& schema) {
    if (!schema.is_object()) return "any";
    if (auto t = schema.find("type"); t != schema.end()) {
        if (t->is_string()) return t->get<std::string>();
        if (t->is_array()) {
            std::string out;
            for (const Json& x : *t)
                if (x.is_string()) out += (out.empty() ? "" : " or ") + x.get<std::string>();
            return out.empty() ? "any" : out;
        }
    }
    if (schema.contains("enum") || schema.contains("const")) return "enum";
    if (schema.contains("properties")) return "object";
    if (schema.contains("items")) return "array";
    if (schema.contains("$ref")) return "reference";
    return "any";
}

// The structure of a type as text: equal keys, equal types (records are shared by it).
std::string typeKey(const TypeExpr& t) {
    switch (t.kind) {
        case ast::TypeKind::Named: {
            std::string out = t.name;
            if (!t.args.empty()) {
                out += '[';
                for (size_t i = 0; i < t.args.size(); ++i) out += (i ? "," : "") + typeKey(*t.args[i]);
                out += ']';
            }
            if (t.max) out += fmt::format(" max {}", *t.max);
            return out;
        }
        case ast::TypeKind::Record: {
            std::string out = "{";
            for (const ast::TypeField& f : t.fields) out += f.name + ":" + typeKey(*f.type) + ",";
            return out + "}";
        }
        case ast::TypeKind::Union: {
            std::string out;
            for (const std::string& o : t.options) out += Json(o).dump() + "|";
            return out;
        }
    }
    return {};
}

TypePtr namedType(std::string name) {
    auto t = std::make_unique<TypeExpr>();
    t->kind = ast::TypeKind::Named;
    t->name = std::move(name);
    return t;
}

// A string the lexer can read back in a literal (the formatter escapes \n, \t, quotes and braces;
// other control characters have no escape).
bool writableText(std::string_view text) {
    return std::none_of(text.begin(), text.end(), [](char c) {
        unsigned char u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
    });
}

// One line of comment text from outside: control characters become spaces, runs of blanks one.
std::string commentSafe(std::string_view text) {
    std::string out;
    for (char c : sanitizeUtf8(text)) {
        unsigned char u = static_cast<unsigned char>(c);
        char d = (u < 0x20 || u == 0x7f) ? ' ' : c;
        if (d == ' ' && (out.empty() || out.back() == ' ')) continue;
        out += d;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

// `text` as `# ` comment lines of at most kCommentWidth columns, paragraphs kept, at most
// `maxLines` lines (the last ending in "...").
void wrapComment(std::string_view text, size_t maxLines, std::vector<std::string>& out) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string paragraph = commentSafe(text.substr(start, end - start));
        start = end + 1;
        if (paragraph.empty()) continue;
        std::string line;
        size_t pos = 0;
        while (pos < paragraph.size()) {
            size_t space = paragraph.find(' ', pos);
            if (space == std::string::npos) space = paragraph.size();
            std::string word = paragraph.substr(pos, space - pos);
            pos = space + 1;
            if (!line.empty() && codePointCount(line) + 1 + codePointCount(word) > kCommentWidth) {
                lines.push_back(line);
                line.clear();
            }
            line += (line.empty() ? "" : " ") + word;
        }
        if (!line.empty()) lines.push_back(line);
    }
    for (size_t i = 0; i < lines.size() && i < maxLines; ++i) {
        bool cut = i + 1 == maxLines && lines.size() > maxLines;
        out.push_back("# " + lines[i] + (cut ? " ..." : ""));
    }
}

std::string joinWords(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
    return out;
}

// `entities` → `entity`, `edits` → `edit`: a list property's item, for type names.
std::string singular(const std::string& word) {
    if (word.size() > 3 && word.ends_with("ies")) return word.substr(0, word.size() - 3) + "y";
    if (word.size() > 1 && word.ends_with("s") && !word.ends_with("ss")) return word.substr(0, word.size() - 1);
    return word;
}

}  // namespace

bool isRemitKeyword(std::string_view word) {
    static const std::set<std::string_view> keywords = {
#define REMIT_X(name, text) text,
        REMIT_KEYWORDS(REMIT_X)
#undef REMIT_X
    };
    return keywords.count(word) > 0;
}

std::string remitIdentifierFrom(std::string_view name) {
    std::string id = identifierFrom(name);
    if (isRemitKeyword(id)) id += '_';
    return id;
}

bool isCapabilityNamespace(std::string_view name) {
    return !name.empty() && !(name[0] >= '0' && name[0] <= '9') && identifierFrom(name) == name && !isRemitKeyword(name);
}

std::string upperCamelFrom(std::string_view name) {
    std::string out;
    bool up = true;
    for (char c : name) {
        bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!word) {
            up = true;
            continue;
        }
        out += up && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
        up = false;
    }
    if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "T" + out;
    return out;
}

std::string namespaceFrom(std::string_view serviceName) {
    std::string_view last = serviceName.substr(serviceName.rfind('/') == std::string_view::npos
                                                   ? 0
                                                   : serviceName.rfind('/') + 1);
    std::vector<std::string> words;
    std::string word;
    auto flush = [&] {
        if (!word.empty() && word != "mcp" && word != "server" && word != "servers") words.push_back(word);
        word.clear();
    };
    for (char c : last) {
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            word += c;
        } else if (c >= 'A' && c <= 'Z') {
            word += static_cast<char>(c - 'A' + 'a');
        } else {
            flush();
        }
    }
    flush();
    std::string out;
    for (const std::string& w : words) out += (out.empty() ? "" : "_") + w;
    if (out.empty()) return "service";
    if (out[0] >= '0' && out[0] <= '9') out = "_" + out;
    if (isRemitKeyword(out)) out += '_';
    return out;
}

// ---------------------------------------------------------------- SchemaTyper

SchemaTyper::Typed SchemaTyper::fail(std::string why) {
    Typed out;
    out.why = std::move(why);
    return out;
}

std::string SchemaTyper::reserveName(const std::string& wanted) {
    std::string base = wanted.empty() ? "Record" : wanted;
    if (builtinTypeNames().count(base)) base += "Value";
    std::string name = base;
    for (int n = 2; std::find(taken_.begin(), taken_.end(), name) != taken_.end(); ++n) name = base + std::to_string(n);
    taken_.push_back(name);
    return name;
}

std::vector<std::string> SchemaTyper::takeUnbounded() { return std::exchange(unbounded_, {}); }
std::vector<std::string> SchemaTyper::takeOmitted() { return std::exchange(omitted_, {}); }

void SchemaTyper::discardDeclarations() {
    std::erase_if(named_, [](const Named& n) { return n.type != nullptr; });
}

std::vector<ast::DeclPtr> SchemaTyper::takeDeclarations() {
    std::vector<ast::DeclPtr> out;
    for (Named& n : named_) {
        if (!n.type) continue;  // taken already
        auto decl = std::make_unique<ast::Decl>();
        decl->kind = ast::DeclKind::Type;
        ast::TypeDecl type;
        type.name = n.name;
        type.type = std::move(n.type);
        decl->node = std::move(type);
        out.push_back(std::move(decl));
    }
    return out;
}

SchemaTyper::Typed SchemaTyper::typeFor(const Json& schema, const Json& root, const std::string& nameHint,
                                        const std::string& path, bool ownRecord) {
    if (depth_ >= kMaxSchemaDepth) return fail(fmt::format("nested deeper than {} levels", kMaxSchemaDepth));
    struct Deeper {
        int& depth;
        explicit Deeper(int& d) : depth(d) { ++depth; }
        ~Deeper() { --depth; }
    } deeper(depth_);
    if (schema.is_boolean() || (schema.is_object() && schema.empty())) return fail("any JSON value (no schema)");
    if (!schema.is_object()) return fail("not a JSON Schema");

    if (auto ref = schema.find("$ref"); ref != schema.end()) {
        std::string target = ref->is_string() ? ref->get<std::string>() : std::string();
        for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
            if (!target.starts_with(prefix)) continue;
            std::string name = target.substr(std::string_view(prefix).size());
            const char* table = prefix[2] == '$' ? "$defs" : "definitions";
            auto defs = root.is_object() ? root.find(table) : root.end();
            if (defs == root.end() || !defs->is_object() || !defs->contains(name))
                return fail(fmt::format("a reference to '{}', which the schema does not define", commentSafe(target)));
            if (std::find(refStack_.begin(), refStack_.end(), target) != refStack_.end())
                return fail(fmt::format("recursive (it refers to '{}' inside itself)", commentSafe(target)));
            refStack_.push_back(target);
            Typed out = typeFor((*defs)[name], root, upperCamelFrom(name), path);
            refStack_.pop_back();
            return out;
        }
        return fail(fmt::format("a reference outside the schema ('{}')", commentSafe(target)));
    }

    auto stringOptions = [&](const Json& values, std::vector<std::string>& into) {
        if (!values.is_array() || values.empty()) return false;
        for (const Json& v : values) {
            if (!v.is_string() || !writableText(v.get_ref<const std::string&>())) return false;
            if (std::find(into.begin(), into.end(), v.get<std::string>()) == into.end()) into.push_back(v.get<std::string>());
        }
        return true;
    };
    auto unionOf = [](std::vector<std::string> options) {
        auto t = std::make_unique<TypeExpr>();
        t->kind = ast::TypeKind::Union;
        t->options = std::move(options);
        return Typed{std::move(t), {}, {}};
    };
    if (auto values = schema.find("enum"); values != schema.end()) {
        std::vector<std::string> options;
        if (!stringOptions(*values, options)) return fail("an enum of values that are not all plain strings");
        return unionOf(std::move(options));
    }
    if (auto value = schema.find("const"); value != schema.end()) {
        std::vector<std::string> options;
        if (!stringOptions(Json::array({*value}), options)) return fail("a constant that is not a plain string");
        return unionOf(std::move(options));
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
        auto alternatives = schema.find(combinator);
        if (alternatives == schema.end()) continue;
        if (!alternatives->is_array() || alternatives->empty()) return fail(fmt::format("an empty {}", combinator));
        std::vector<std::string> options;
        bool strings = true, nullable = false;
        for (const Json& alt : *alternatives) {
            if (alt.is_object() && alt.value("type", Json()) == "null") {
                nullable = true;
                continue;
            }
            bool ok = alt.is_object() && ((alt.contains("const") && stringOptions(Json::array({alt["const"]}), options)) ||
                                          (alt.contains("enum") && stringOptions(alt["enum"], options)));
            strings = strings && ok;
        }
        if (nullable) return fail("a value that may be null");
        if (!strings) return fail(fmt::format("a union ({}) of different types", combinator));
        return unionOf(std::move(options));
    }
    if (auto all = schema.find("allOf"); all != schema.end()) {
        if (all->is_array() && all->size() == 1) return typeFor((*all)[0], root, nameHint, path);
        return fail("a combination (allOf) of schemas");
    }

    std::string type;
    if (auto t = schema.find("type"); t != schema.end()) {
        if (t->is_string()) {
            type = t->get<std::string>();
        } else if (t->is_array() && t->size() == 1 && (*t)[0].is_string()) {
            type = (*t)[0].get<std::string>();
        } else if (t->is_array() && std::find(t->begin(), t->end(), Json("null")) != t->end()) {
            return fail("a value that may be null");
        } else {
            return fail(fmt::format("a union of types ({})", schemaWord(schema)));
        }
    } else if (schema.contains("properties")) {
        type = "object";
    } else if (schema.contains("items")) {
        type = "array";
    } else {
        return fail("any JSON value (the schema gives no type)");
    }

    if (type == "string") return Typed{namedType("Str"), {}, {}};
    if (type == "integer") return Typed{namedType("Int"), {}, {}};
    if (type == "number") return Typed{namedType("Float"), {}, {}};
    if (type == "boolean") return Typed{namedType("Bool"), {}, {}};
    if (type == "null") return Typed{namedType("Unit"), {}, {}};
    if (type == "array") {
        auto items = schema.find("items");
        if (schema.contains("prefixItems") || (items != schema.end() && items->is_array()))
            return fail("a tuple (a list whose items have different types)");
        if (items == schema.end()) return fail("a list whose items have no schema");
        Typed item = typeFor(*items, root, upperCamelFrom(singular(nameHint)), path + "[]");
        if (!item.type) return item;
        auto list = namedType("List");
        list->args.push_back(std::move(item.type));
        if (auto max = schema.find("maxItems"); max != schema.end() && max->is_number_integer() && max->get<int64_t>() >= 0)
            list->max = std::min<int64_t>(max->get<int64_t>(), int64_t{1} << 62);
        else
            unbounded_.push_back(path);
        return Typed{std::move(list), {}, {}};
    }
    if (type != "object") return fail(fmt::format("of the unknown type '{}'", commentSafe(type)));

    auto properties = schema.find("properties");
    if (properties == schema.end() || !properties->is_object() || properties->empty())
        return fail("a map (an object with free-form keys)");
    std::vector<std::string> required;
    if (auto r = schema.find("required"); r != schema.end() && r->is_array())
        for (const Json& name : *r)
            if (name.is_string()) required.push_back(name.get<std::string>());
    auto record = std::make_unique<TypeExpr>();
    record->kind = ast::TypeKind::Record;
    for (const auto& [name, property] : properties->items()) {
        std::string where = path.empty() ? name : path + "." + name;
        if (std::find(required.begin(), required.end(), name) == required.end()) {
            omitted_.push_back(where);
            continue;
        }
        if (!isFieldName(name))
            return fail(fmt::format("an object with the property '{}', which cannot be a Remit field name",
                                    commentSafe(name)));
        Typed field = typeFor(property, root, upperCamelFrom(name), where);
        if (!field.type) {
            if (field.where.empty()) field.where = commentSafe(where);
            return field;
        }
        ast::TypeField f;
        f.name = name;
        f.type = std::move(field.type);
        record->fields.push_back(std::move(f));
    }
    if (record->fields.empty()) return fail("an object whose properties are all optional");
    std::string key = ownRecord ? std::string() : typeKey(*record);
    for (const Named& n : named_)
        if (!key.empty() && n.key == key) return Typed{namedType(n.name), {}, {}};
    std::string name = reserveName(nameHint);
    named_.push_back(Named{name, key, std::move(record)});
    return Typed{namedType(name), {}, {}};
}

// ---------------------------------------------------------------- the draft

namespace {

ast::DeclPtr capabilityDecl(const std::string& name, std::vector<ast::Param> params, TypePtr ret, bool idempotent) {
    auto decl = std::make_unique<ast::Decl>();
    decl->kind = ast::DeclKind::Capability;
    ast::CapabilityDecl cap;
    cap.name = name;
    cap.params = std::move(params);
    cap.ret = std::move(ret);
    cap.idempotent = idempotent;
    decl->node = std::move(cap);
    return decl;
}

}  // namespace

HostDraft draftHostInterface(const std::string& ns, const std::vector<std::string>& header,
                             const std::vector<ImportedOperation>& operations, const DraftWords& words) {
    HostDraft draft;
    ast::HostInterface host;
    SchemaTyper typer;
    std::vector<std::string> pending;  // comments for the next declaration
    for (const std::string& line : header) pending.push_back(line.empty() ? "#" : "# " + commentSafe(line));
    pending.push_back("#");
    pending.push_back(fmt::format("# TODO(operator): this is a draft. For each capability decide what no {} says:",
                                  commentSafe(words.description)));
    pending.push_back("#   - the tags its results carry (`tags untrusted` for text the outside world wrote),");
    pending.push_back("#   - `deny` tags on parameters that must never receive some data, and `approve` tags or");
    pending.push_back("#     `approval always` for calls a person must confirm (writes, deletes, payments),");
    pending.push_back("#   - its `cost` in USD per call.");
    pending.push_back("# Then grant what a program may use in policy.toml.");
    pending.push_back("#");
    std::map<std::string, std::string> capabilityOf;  // capability name → the operation it came from
    // Each declaration gets the comments pending before it (the header, notes on operations left
    // out), then its own.
    auto push = [&](ast::DeclPtr decl, std::vector<std::string> own) {
        decl->comments.leading = std::move(pending);
        pending.clear();
        decl->comments.leading.insert(decl->comments.leading.end(), own.begin(), own.end());
        host.decls.push_back(std::move(decl));
    };

    for (const ImportedOperation& op : operations) {
        const std::string shownName = commentSafe(op.name);
        std::string capability = ns + "." + remitIdentifierFrom(op.name);
        auto notImported = [&](const std::string& why) {
            draft.notImported.push_back(fmt::format("'{}': {}", shownName, why));
            pending.push_back(fmt::format("# NOT IMPORTED: '{}': {}", shownName, why));
            typer.discardDeclarations();  // the records it needed are dropped with it
            typer.takeUnbounded();
            typer.takeOmitted();
        };
        if (auto other = capabilityOf.find(capability); other != capabilityOf.end()) {
            notImported(fmt::format("it would be {}, as '{}' is", capability, commentSafe(other->second)));
            continue;
        }
        std::vector<std::string> comments;
        if (!op.title.empty()) wrapComment(op.title, 2, comments);
        if (!op.description.empty()) wrapComment(op.description, kMaxDescriptionLines, comments);
        if (remitIdentifierFrom(op.name) != op.name) comments.push_back(fmt::format("# the service names it '{}'", shownName));
        for (const std::string& remark : op.remarks) comments.push_back("# " + commentSafe(remark));

        // Parameters: the required input properties.
        std::vector<ast::Param> params;
        std::vector<std::string> optional;
        std::string why;
        const Json& input = op.input;
        auto properties = input.is_object() ? input.find("properties") : input.end();
        std::vector<std::string> required;
        if (auto r = input.is_object() ? input.find("required") : input.end(); r != input.end() && r->is_array())
            for (const Json& n : *r)
                if (n.is_string()) required.push_back(n.get<std::string>());
        std::set<std::string> paramNames;
        if (properties != input.end() && properties->is_object()) {
            for (const auto& [name, schema] : properties->items()) {
                if (std::find(required.begin(), required.end(), name) == required.end()) {
                    optional.push_back(fmt::format("{} ({})", commentSafe(name), schemaWord(schema)));
                    continue;
                }
                std::string param = remitIdentifierFrom(name);
                if (!paramNames.insert(param).second) {
                    why = fmt::format("its parameters '{}' and another both become '{}'", commentSafe(name), param);
                    break;
                }
                SchemaTyper::Typed typed = typer.typeFor(schema, input, upperCamelFrom(name), name);
                if (!typed.type) {
                    why = typed.where.empty()
                              ? fmt::format("parameter '{}' is {}", commentSafe(name), typed.why)
                              : fmt::format("parameter '{}': {} is {}", commentSafe(name), typed.where, typed.why);
                    break;
                }
                ast::Param p;
                p.name = param;
                p.type = std::move(typed.type);
                params.push_back(std::move(p));
            }
        } else if (input.is_object() && input.contains("additionalProperties") && input["additionalProperties"] != false) {
            why = "its input is a map (an object with free-form keys)";
        }
        if (!why.empty()) {
            notImported(why);
            continue;
        }

        // The result.
        TypePtr ret;
        if (op.output.is_null()) {
            ret = namedType("Str");
            comments.push_back(fmt::format("# result: {} ({})", commentSafe(words.textResult), commentSafe(words.noOutput)));
        } else {
            // A record result gets its own name, so each result type reads as its capability's.
            SchemaTyper::Typed typed =
                typer.typeFor(op.output, op.output, upperCamelFrom(op.name) + "Result", "result", true);
            if (typed.type) {
                ret = std::move(typed.type);
            } else {
                ret = namedType("Str");
                std::string note =
                    typed.where.empty()
                        ? fmt::format("its result is {}; typed Str, {}", typed.why, commentSafe(words.textResult))
                        : fmt::format("its {} is {}; typed Str, {}", typed.where, typed.why, commentSafe(words.textResult));
                comments.push_back("# " + note);
                draft.notes.push_back(fmt::format("'{}': {}", shownName, note));
            }
        }
        if (optional.size())
            wrapComment(fmt::format("optional, never sent (Remit parameters are all required): {}", joinWords(optional)),
                        4, comments);
        if (std::vector<std::string> omitted = typer.takeOmitted(); !omitted.empty())
            wrapComment(fmt::format("optional record fields left out: {}", joinWords(omitted)), 4, comments);
        if (std::vector<std::string> unbounded = typer.takeUnbounded(); !unbounded.empty())
            wrapComment(fmt::format("unbounded list (no maxItems; add `max N` where you can): {}", joinWords(unbounded)),
                        4, comments);

        for (ast::DeclPtr& d : typer.takeDeclarations()) push(std::move(d), {});
        push(capabilityDecl(capability, std::move(params), std::move(ret), op.idempotent), std::move(comments));
        capabilityOf[capability] = op.name;
        ++draft.capabilities;
    }
    host.endComments = std::move(pending);
    draft.text = formatHost(host);
    return draft;
}

}  // namespace remit
