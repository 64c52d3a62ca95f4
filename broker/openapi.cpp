// An OpenAPI 3 document read into its operations (broker/openapi.h).
#include "broker/openapi.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "runtime/files.h"

namespace remit {

namespace {

// ---------------------------------------------------------------- the document

struct Reader {
    const Json& root;
    std::string problem;  // why the operation being read cannot be

    // `value` with a local `$ref` followed (a chain of them, at most 32), or null with `problem` set.
    const Json* deref(const Json& value) {
        const Json* at = &value;
        for (int hops = 0; at->is_object() && at->contains("$ref"); ++hops) {
            const Json& ref = (*at)["$ref"];
            if (hops == 32 || !ref.is_string()) {
                problem = "a $ref that does not end";
                return nullptr;
            }
            at = resolveRef(root, ref.get<std::string>());
            if (!at) {
                problem = fmt::format("the $ref '{}' does not point into this document", ref.get<std::string>());
                return nullptr;
            }
        }
        return at;
    }

    static const Json* resolveRef(const Json& root, const std::string& ref) {
        if (ref.rfind("#/", 0) != 0) return ref == "#" ? &root : nullptr;
        const Json* at = &root;
        size_t start = 2;
        while (true) {
            size_t slash = ref.find('/', start);
            std::string token = ref.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
            std::string key;  // ~1 is '/', ~0 is '~' (RFC 6901)
            for (size_t i = 0; i < token.size(); ++i) {
                if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
                    key += token[i + 1] == '0' ? '~' : '/';
                    ++i;
                } else {
                    key += token[i];
                }
            }
            if (at->is_object()) {
                auto it = at->find(key);
                if (it == at->end()) return nullptr;
                at = &*it;
            } else if (at->is_array()) {
                size_t index = 0;
                auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
                if (ec != std::errc() || end != key.data() + key.size() || index >= at->size()) return nullptr;
                at = &(*at)[index];
            } else {
                return nullptr;
            }
            if (slash == std::string::npos) return at;
            start = slash + 1;
        }
    }

    static std::string text(const Json& object, const char* key) {
        auto it = object.find(key);
        return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
    }

    // The schema of a parameter or media type: `schema`, or {} (any value) when there is none.
    static Json schemaOf(const Json& object) {
        auto it = object.find("schema");
        return it != object.end() && (it->is_object() || it->is_boolean()) ? *it : Json::object();
    }

    bool parameter(const Json& raw, OpenApiParameter& out) {
        const Json* p = deref(raw);
        if (!p) return false;
        // find, not the const operator[], which has undefined behaviour on a missing key.
        auto name = p->is_object() ? p->find("name") : p->end();
        auto place = p->is_object() ? p->find("in") : p->end();
        if (name == p->end() || place == p->end() || !name->is_string() || !place->is_string()) {
            problem = "a parameter without a name or a place (`in`)";
            return false;
        }
        out.name = name->get<std::string>();
        std::string in = place->get<std::string>();
        if (in == "path") out.in = OpenApiParameter::In::Path;
        else if (in == "query") out.in = OpenApiParameter::In::Query;
        else if (in == "header") out.in = OpenApiParameter::In::Header;
        else if (in == "cookie") out.in = OpenApiParameter::In::Cookie;
        else {
            problem = fmt::format("parameter '{}' is in '{}', which OpenAPI does not have", out.name, in);
            return false;
        }
        auto required = p->find("required");
        out.required = out.in == OpenApiParameter::In::Path ||
                       (required != p->end() && required->is_boolean() && required->get<bool>());
        out.description = text(*p, "description");
        out.schema = schemaOf(*p);
        if (auto content = p->find("content"); content != p->end() && content->is_object() && !content->empty())
            out.schema = schemaOf(content->begin().value());
        std::string style = text(*p, "style");
        auto explode = p->find("explode");
        bool form = style.empty() ? out.in == OpenApiParameter::In::Query || out.in == OpenApiParameter::In::Cookie
                                  : style == "form";
        out.explode = explode != p->end() && explode->is_boolean() ? explode->get<bool>() : form;
        if (!style.empty() && style != "form" && style != "simple") {
            problem = fmt::format("parameter '{}' has style '{}'; only form and simple are supported", out.name, style);
            return false;
        }
        return true;
    }

    bool body(const Json& raw, OpenApiOperation& op) {
        const Json* b = deref(raw);
        if (!b) return false;
        if (!b->is_object()) {
            problem = "a requestBody that is not an object";
            return false;
        }
        op.hasBody = true;
        auto required = b->find("required");
        op.bodyRequired = required != b->end() && required->is_boolean() && required->get<bool>();
        op.bodyDescription = text(*b, "description");
        if (auto content = b->find("content"); content != b->end() && content->is_object())
            for (auto it = content->begin(); it != content->end(); ++it) {
                op.bodyMediaTypes.push_back(it.key());
                if (op.bodyMediaType.empty() && isJsonMediaType(it.key()) && it->is_object()) {
                    op.bodyMediaType = it.key();
                    op.bodySchema = schemaOf(*it);
                }
            }
        return true;
    }

    bool result(const Json& responses, OpenApiOperation& op) {
        if (!responses.is_object()) return true;
        // The success response: 200, then the other 2xx codes in order, then 2XX, then default.
        std::string chosen;
        for (auto it = responses.begin(); it != responses.end(); ++it) {
            const std::string& code = it.key();
            bool success = code.size() == 3 && code[0] == '2' && std::isdigit(static_cast<unsigned char>(code[1])) &&
                           std::isdigit(static_cast<unsigned char>(code[2]));
            if (success && (chosen.empty() || chosen == "2XX" || chosen == "default" || code < chosen)) chosen = code;
            else if ((code == "2XX" || code == "2xx") && (chosen.empty() || chosen == "default")) chosen = code;
            else if (code == "default" && chosen.empty()) chosen = code;
        }
        if (chosen.empty()) return true;
        op.resultStatus = chosen;
        const Json* r = deref(responses[chosen]);
        if (!r) return false;
        if (!r->is_object()) return true;
        auto content = r->find("content");
        if (content == r->end() || !content->is_object() || content->empty()) return true;
        for (auto it = content->begin(); it != content->end(); ++it)
            if (isJsonMediaType(it.key()) && it->is_object()) {
                op.result = OpenApiOperation::Result::Json;
                op.resultMediaType = it.key();
                op.resultSchema = schemaOf(*it);
                return true;
            }
        op.result = OpenApiOperation::Result::Text;
        op.resultMediaType = content->begin().key();
        return true;
    }

    static std::vector<std::vector<std::string>> security(const Json& list) {
        std::vector<std::vector<std::string>> out;
        if (!list.is_array()) return out;
        for (const Json& alternative : list) {
            if (!alternative.is_object()) continue;
            std::vector<std::string> schemes;
            for (auto it = alternative.begin(); it != alternative.end(); ++it) schemes.push_back(it.key());
            out.push_back(std::move(schemes));
        }
        return out;
    }
};

std::string derivedName(const std::string& method, const std::string& path) {
    std::string name;
    for (char c : method) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string word;
    auto flush = [&] {
        if (!word.empty()) name += "_" + word;
        word.clear();
    };
    for (char c : path) {
        if (c == '/') flush();
        else if (c != '{' && c != '}') word += c;
    }
    flush();
    return name;
}

}  // namespace

const char* parameterPlace(OpenApiParameter::In in) {
    switch (in) {
        case OpenApiParameter::In::Path: return "path";
        case OpenApiParameter::In::Query: return "query";
        case OpenApiParameter::In::Header: return "header";
        case OpenApiParameter::In::Cookie: return "cookie";
    }
    return "query";
}

bool isJsonMediaType(std::string_view mediaType) {
    std::string_view type = mediaType.substr(0, mediaType.find(';'));
    while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
    std::string lower;
    for (char c : type) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower == "application/json" || (lower.size() > 5 && lower.ends_with("+json"));
}

const OpenApiOperation* OpenApiDocument::find(std::string_view name) const {
    for (const OpenApiOperation& op : operations)
        if (op.name == name) return &op;
    return nullptr;
}

std::optional<OpenApiDocument> parseOpenApi(std::string_view what, std::string_view text, std::string& error,
                                            YamlReader yaml) {
    size_t first = text.find_first_not_of(" \t\r\n");
    std::optional<Json> parsed;
    if (first != std::string_view::npos && text[first] == '{') {
        parsed = parseOrderedJsonText(what, text, error);
    } else if (yaml) {
        parsed = yaml(what, text, error);
    } else {
        error = fmt::format("{} is not JSON, and this program reads OpenAPI documents in JSON only", what);
        return std::nullopt;
    }
    if (!parsed) return std::nullopt;
    OpenApiDocument doc;
    doc.root = std::move(*parsed);
    const Json& root = doc.root;
    if (!root.is_object()) {
        error = fmt::format("{} is not an OpenAPI document: it is not an object of fields", what);
        return std::nullopt;
    }
    if (root.contains("swagger")) {
        error = fmt::format("{} is a Swagger 2.0 document; only OpenAPI 3 is read", what);
        return std::nullopt;
    }
    doc.openapi = Reader::text(root, "openapi");
    if (!doc.openapi.starts_with("3.")) {
        error = fmt::format("{} is not an OpenAPI 3 document: it has no field `openapi: 3.x`", what);
        return std::nullopt;
    }
    if (auto info = root.find("info"); info != root.end() && info->is_object()) {
        doc.title = Reader::text(*info, "title");
        doc.version = Reader::text(*info, "version");
        doc.description = Reader::text(*info, "description");
    }
    if (auto servers = root.find("servers"); servers != root.end() && servers->is_array())
        for (const Json& s : *servers)
            if (s.is_object() && s.contains("url") && s["url"].is_string()) doc.servers.push_back(s["url"].get<std::string>());

    Reader reader{root, {}};
    if (auto components = root.find("components"); components != root.end() && components->is_object())
        if (auto schemes = components->find("securitySchemes"); schemes != components->end() && schemes->is_object())
            for (auto it = schemes->begin(); it != schemes->end(); ++it) {
                const Json* s = reader.deref(*it);
                if (!s || !s->is_object()) continue;
                OpenApiSecurityScheme scheme;
                scheme.type = Reader::text(*s, "type");
                scheme.in = Reader::text(*s, "in");
                scheme.paramName = Reader::text(*s, "name");
                scheme.scheme = Reader::text(*s, "scheme");
                for (char& c : scheme.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                doc.securitySchemes.emplace(it.key(), std::move(scheme));
            }
    std::vector<std::vector<std::string>> globalSecurity = Reader::security(root.value("security", Json::array()));

    auto paths = root.find("paths");
    if (paths == root.end() || !paths->is_object()) {
        error = fmt::format("{} has no `paths`: it describes no operations", what);
        return std::nullopt;
    }
    std::set<std::string> names;
    static constexpr const char* kMethods[] = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};
    for (auto pathIt = paths->begin(); pathIt != paths->end(); ++pathIt) {
        const std::string& path = pathIt.key();
        reader.problem.clear();
        const Json* item = reader.deref(*pathIt);
        if (!item || !item->is_object()) {
            doc.problems.push_back(fmt::format("{}: {}", path, item ? "not an object" : reader.problem));
            continue;
        }
        std::vector<OpenApiParameter> shared;
        bool sharedOk = true;
        if (auto ps = item->find("parameters"); ps != item->end() && ps->is_array())
            for (const Json& raw : *ps) {
                OpenApiParameter p;
                if (!reader.parameter(raw, p)) {
                    sharedOk = false;
                    break;
                }
                shared.push_back(std::move(p));
            }
        for (const char* method : kMethods) {
            auto opIt = item->find(method);
            if (opIt == item->end()) continue;
            OpenApiOperation op;
            op.method = method;
            for (char& c : op.method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            op.path = path;
            std::string where = fmt::format("{} {}", op.method, path);
            if (!sharedOk) {
                doc.problems.push_back(fmt::format("{}: {}", where, reader.problem));
                continue;
            }
            if (!opIt->is_object()) {
                doc.problems.push_back(where + ": not an object");
                continue;
            }
            const Json& o = *opIt;
            op.name = Reader::text(o, "operationId");
            op.namedById = !op.name.empty();
            if (op.name.empty()) op.name = derivedName(method, path);
            op.summary = Reader::text(o, "summary");
            op.description = Reader::text(o, "description");
            // (not o.value("deprecated", false), which throws when the field is not a boolean)
            auto deprecated = o.find("deprecated");
            op.deprecated = deprecated != o.end() && deprecated->is_boolean() && deprecated->get<bool>();
            op.parameters = shared;
            bool ok = true;
            if (auto ps = o.find("parameters"); ps != o.end() && ps->is_array())
                for (const Json& raw : *ps) {
                    OpenApiParameter p;
                    if (!(ok = reader.parameter(raw, p))) break;
                    auto same = std::find_if(op.parameters.begin(), op.parameters.end(), [&](const OpenApiParameter& q) {
                        return q.name == p.name && q.in == p.in;
                    });
                    if (same != op.parameters.end()) *same = std::move(p);
                    else op.parameters.push_back(std::move(p));
                }
            if (ok)
                if (auto b = o.find("requestBody"); b != o.end()) ok = reader.body(*b, op);
            if (ok)
                if (auto r = o.find("responses"); r != o.end()) ok = reader.result(*r, op);
            if (!ok) {
                doc.problems.push_back(fmt::format("{}: {}", where, reader.problem));
                continue;
            }
            op.security = o.contains("security") ? Reader::security(o["security"]) : globalSecurity;
            if (!names.insert(op.name).second) {
                doc.problems.push_back(fmt::format("{}: another operation is also named '{}'", where, op.name));
                continue;
            }
            doc.operations.push_back(std::move(op));
        }
    }
    return doc;
}

std::optional<OpenApiDocument> readOpenApiFile(const std::string& path, std::string& error, YamlReader yaml) {
    std::string text;
    if (auto problem = readRegularFile(path, kMaxOpenApiBytes, text)) {
        error = problem->message;
        return std::nullopt;
    }
    if (text.size() > kMaxOpenApiBytes) {
        error = tooLargeMessage(path, kMaxOpenApiBytes, "OpenAPI document");
        return std::nullopt;
    }
    return parseOpenApi(path, text, error, yaml);
}

std::optional<std::string> absoluteServerUrl(const OpenApiDocument& doc) {
    if (doc.servers.empty()) return std::nullopt;
    const std::string& url = doc.servers.front();
    if ((url.starts_with("http://") || url.starts_with("https://")) && url.find('{') == std::string::npos) return url;
    return std::nullopt;
}

}  // namespace remit
