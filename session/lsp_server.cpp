#include "session/lsp_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "session/lsp_analysis.h"
#include "session/lsp_text.h"

namespace remit::lsp {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- URIs

std::optional<std::string> pathOfUri(std::string_view uri) {
    constexpr std::string_view kScheme = "file://";
    if (uri.size() < kScheme.size()) return std::nullopt;
    for (size_t i = 0; i < kScheme.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(uri[i])) != kScheme[i]) return std::nullopt;
    std::string_view rest = uri.substr(kScheme.size());
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    std::string_view authority = rest.substr(0, slash);
    if (!authority.empty() && authority != "localhost") return std::nullopt;  // a file on another machine
    std::string_view encoded = rest.substr(slash);
    if (size_t end = encoded.find_first_of("?#"); end != std::string_view::npos) encoded = encoded.substr(0, end);
    std::string path;
    for (size_t i = 0; i < encoded.size(); ++i) {
        char c = encoded[i];
        if (c == '%' && i + 2 < encoded.size()) {
            unsigned value = 0;
            auto [end, ec] = std::from_chars(encoded.data() + i + 1, encoded.data() + i + 3, value, 16);
            if (ec == std::errc() && end == encoded.data() + i + 3) {
                path += static_cast<char>(value);
                i += 2;
                continue;
            }
        }
        path += c;
    }
    if (path.find('\0') != std::string::npos || path.empty() || path[0] != '/') return std::nullopt;
    return fs::path(path).lexically_normal().string();
}

std::string uriOfPath(std::string_view path) {
    // Everything but RFC 3986's unreserved characters and the path's slashes is percent-encoded,
    // as VS Code's URIs are.
    std::string out = "file://";
    for (char c : path) {
        auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') out += c;
        else out += fmt::format("%{:02X}", u);
    }
    return out;
}

// ---------------------------------------------------------------- framing

FrameReader::FrameReader(ReadBytes read, size_t maxMessageBytes)
    : read_(std::move(read)), maxMessageBytes_(maxMessageBytes) {}

bool FrameReader::fill() {
    if (eof_) return false;
    if (pos_ > 0 && pos_ == buffer_.size()) {
        buffer_.clear();
        pos_ = 0;
    } else if (pos_ > (size_t(1) << 16)) {
        buffer_.erase(0, pos_);
        pos_ = 0;
    }
    char chunk[1 << 16];
    size_t n = read_(chunk, sizeof chunk);
    if (n == 0) {
        eof_ = true;
        return false;
    }
    buffer_.append(chunk, n);
    return true;
}

std::optional<std::string> FrameReader::readLine(bool& tooLong) {
    tooLong = false;
    std::string line;
    for (;;) {
        size_t newline = buffer_.find('\n', pos_);
        size_t end = newline == std::string::npos ? buffer_.size() : newline;
        size_t room = kMaxHeaderLineBytes + 1 - std::min(line.size(), kMaxHeaderLineBytes + 1);
        line.append(buffer_, pos_, std::min(end - pos_, room));
        if (line.size() > kMaxHeaderLineBytes) tooLong = true;
        if (newline != std::string::npos) {
            pos_ = newline + 1;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (tooLong) line.resize(kMaxHeaderLineBytes);
            return line;
        }
        pos_ = buffer_.size();
        if (!fill()) {
            if (line.empty()) return std::nullopt;
            if (tooLong) line.resize(kMaxHeaderLineBytes);
            return line;  // the input ends without a line break
        }
    }
}

bool FrameReader::readBody(size_t n, std::string& out, size_t keep) {
    out.clear();
    out.reserve(std::min(n, keep));
    while (n > 0) {
        if (pos_ == buffer_.size() && !fill()) return false;
        size_t take = std::min(n, buffer_.size() - pos_);
        if (out.size() < keep) out.append(buffer_, pos_, std::min(take, keep - out.size()));
        pos_ += take;
        n -= take;
    }
    return true;
}

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// RFC 7230's token characters: what a header's name is made of.
bool isHeaderName(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name) {
        auto u = static_cast<unsigned char>(c);
        if (!std::isalnum(u) && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
    }
    return true;
}

Frame problem(std::string text, Json id = nullptr) {
    Frame f;
    f.kind = Frame::Kind::Problem;
    f.problem = std::move(text);
    f.id = std::move(id);
    return f;
}

}  // namespace

Frame FrameReader::next() {
    if (pending_) {
        Frame f = std::move(*pending_);
        pending_.reset();
        return f;
    }
    size_t length = 0;
    bool hasLength = false;
    std::string trouble;
    bool inHeader = false;
    for (;;) {
        bool tooLong = false;
        std::optional<std::string> line = readLine(tooLong);
        if (!line) {
            if (inHeader) return problem("the input ended inside a message header");
            return Frame{};
        }
        if (line->empty()) {
            if (!inHeader) continue;  // blank lines between messages
            break;
        }
        inHeader = true;
        if (tooLong) {
            if (trouble.empty()) trouble = fmt::format("a header line is longer than {} bytes", kMaxHeaderLineBytes);
            continue;
        }
        std::string_view text = *line;
        // Resynchronise on a header that follows junk on the same line (a body sent without one).
        std::string lowered = lower(text);
        if (size_t at = lowered.find("content-length:"); at != std::string::npos && at > 0) {
            if (trouble.empty()) trouble = "text before a Content-Length header is not a header";
            text = text.substr(at);
        }
        size_t colon = text.find(':');
        std::string_view name = colon == std::string_view::npos ? std::string_view() : trim(text.substr(0, colon));
        if (!isHeaderName(name)) {
            if (trouble.empty())
                trouble = fmt::format("'{}' is not a header line (\"Name: value\")",
                                      firstCodePoints(sanitizeUtf8(text.substr(0, 60)), 40));
            continue;
        }
        std::string_view value = trim(text.substr(colon + 1));
        std::string key = lower(name);
        if (key == "content-length") {
            size_t n = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
                if (trouble.empty())
                    trouble = fmt::format("Content-Length '{}' is not a number of bytes",
                                          firstCodePoints(sanitizeUtf8(value.substr(0, 40)), 30));
                hasLength = false;
                continue;
            }
            length = n;
            hasLength = true;
        } else if (key == "content-type") {
            std::string type = lower(value);
            size_t charset = type.find("charset=");
            if (charset != std::string::npos) {
                std::string_view cs = trim(std::string_view(type).substr(charset + 8));
                if (cs != "utf-8" && cs != "utf8" && trouble.empty())
                    trouble = "only the utf-8 charset is supported; the message is read as UTF-8";
            }
        }
    }
    if (!hasLength)
        return problem(trouble.empty() ? "a message header without Content-Length" : trouble + "; no usable Content-Length");
    Frame message;
    if (length > maxMessageBytes_) {
        std::string head;
        if (!readBody(length, head, 4096)) return problem("the input ended inside a message body");
        return problem(fmt::format("a message of {} bytes is over the limit of {} bytes", length, maxMessageBytes_),
                       recoverMessageId(head));
    }
    if (!readBody(length, message.body, length)) return problem("the input ended inside a message body");
    message.kind = Frame::Kind::Message;
    if (!trouble.empty()) {
        // Report the header's problem, then hand over the message it still framed.
        pending_ = std::move(message);
        return problem(trouble);
    }
    return message;
}

std::string frameMessage(const Json& message) {
    std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
    return fmt::format("Content-Length: {}\r\n\r\n", body.size()) + body;
}

// ---------------------------------------------------------------- the server

namespace {

using jsonrpc::errorReply;
using jsonrpc::resultReply;

// LSP's own error codes (LSP 3.17, "Response Message").
constexpr int kServerNotInitialized = -32002;
constexpr int kRequestFailed = -32803;
constexpr int kRequestCancelled = -32800;
constexpr size_t kMaxMessageDepth = 256;
constexpr int kLogError = 1;  // window/logMessage's MessageType.Error

// What the reading thread hands to the server: a parsed message, a reply it wrote itself (to a
// frame or text it could not read), or the end of the input.
struct Item {
    enum class Kind { Message, Reply, End } kind;
    Json json;
};

// The queue between the reading thread and the server. Shared, so a reading thread still blocked
// in read() when the server returns (after `exit`) owns what it touches.
struct Inbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Item> items;
    std::atomic<int> pendingEdits{0};  // document changes queued: a check of older text is abandoned
    std::atomic<bool> readerDone{false};
};

bool changesDocuments(const Json& message) {
    auto method = message.find("method");
    if (method == message.end() || !method->is_string()) return false;
    const std::string& m = method->get_ref<const std::string&>();
    return m == "textDocument/didChange" || m == "textDocument/didClose" || m == "textDocument/didOpen" ||
           m == "exit";
}

// Thrown by a handler for bad parameters: the -32602 reply (or a log line for a notification).
struct BadParams {
    std::string message;
};
// Thrown by a handler that refuses a request: the error reply with this code.
struct Refused {
    int code;
    std::string message;
};

const Json& member(const Json& object, const char* key) {
    static const Json kNull;
    if (!object.is_object()) return kNull;
    auto it = object.find(key);
    return it == object.end() ? kNull : *it;
}

const std::string& stringMember(const Json& object, const char* key, const char* what) {
    const Json& value = member(object, key);
    if (!value.is_string()) throw BadParams{fmt::format("{} needs '{}' as a string", what, key)};
    return value.get_ref<const std::string&>();
}

uint32_t positionField(const Json& position, const char* key) {
    const Json& v = member(position, key);
    if (!v.is_number_integer() && !v.is_number_unsigned())
        throw BadParams{fmt::format("a position needs '{}' as a non-negative integer", key)};
    int64_t n = v.get<int64_t>();
    if (n < 0) throw BadParams{fmt::format("a position needs '{}' as a non-negative integer", key)};
    return static_cast<uint32_t>(std::min<int64_t>(n, UINT32_MAX));
}

Position positionOf(const Json& json) {
    if (!json.is_object()) throw BadParams{"'position' must be an object with line and character"};
    return Position{positionField(json, "line"), positionField(json, "character")};
}

struct Document {
    std::string uri;
    std::optional<std::string> path;
    DocumentKind kind = DocumentKind::Program;
    int64_t version = 0;
    DocumentText text;
    std::unique_ptr<Analysis> analysis;  // of `text`, unless dirty
    bool dirty = true;
};

class Server {
public:
    Server(const WriteBytes& write, const ServerOptions& options) : write_(write), options_(options) {}
    int run(const ReadBytes& read);

private:
    const WriteBytes& write_;
    const ServerOptions& options_;
    std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
    enum class State { Uninitialized, Running, ShutDown } state_ = State::Uninitialized;
    bool outputGone_ = false;
    std::optional<int> exitCode_;
    PositionEncoding encoding_ = PositionEncoding::Utf16;
    std::map<std::string, Document> docs_;  // by URI as the client sent it
    // Diagnostics: what the analysis of each open document says about each URI, and what was last
    // published for each URI (the merge over every document).
    std::map<std::string, std::map<std::string, Json>> contributions_;
    std::map<std::string, Json> published_;

    void send(const Json& message);
    void notify(const std::string& method, Json params) {
        send(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
    }
    void log(int type, const std::string& message) {
        notify("window/logMessage", {{"type", type}, {"message", message}});
    }

    std::optional<Item> take(bool wait);
    bool cancelledWhileQueued(const Json& id);
    void handle(const Json& message);
    Json request(const std::string& method, const Json& params);
    void notification(const std::string& method, const Json& params);

    Json initialize(const Json& params);
    void didOpen(const Json& params);
    void didChange(const Json& params);
    void didClose(const Json& params);
    void markPrograms();

    Document& openDocument(const Json& params);
    Document& analysed(Document& doc);
    bool analyse(Document& doc, bool interruptible);
    void analysePending();
    Query queryOf(const Document& doc) const;
    void publishFor(const Document& doc);
    // Publishes the merged diagnostics of `uri` when they changed since the last time (or `always`).
    void publish(const std::string& uri, bool always = false);
    std::string uriOf(const std::string& file) const;
    const std::string* openText(const std::string& path) const;
};

void Server::send(const Json& message) {
    if (outputGone_) return;
    if (!write_(frameMessage(message))) outputGone_ = true;
}

std::optional<Item> Server::take(bool wait) {
    std::unique_lock<std::mutex> lock(inbox_->mutex);
    if (wait) inbox_->ready.wait(lock, [&] { return !inbox_->items.empty(); });
    if (inbox_->items.empty()) return std::nullopt;
    Item item = std::move(inbox_->items.front());
    inbox_->items.pop_front();
    if (item.kind == Item::Kind::Message && changesDocuments(item.json)) --inbox_->pendingEdits;
    return item;
}

// A request the client cancelled before the server reached it (`$/cancelRequest` queued behind it).
bool Server::cancelledWhileQueued(const Json& id) {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    for (const Item& item : inbox_->items) {
        if (item.kind != Item::Kind::Message) continue;
        const Json& method = member(item.json, "method");
        if (method.is_string() && method == "$/cancelRequest" && member(member(item.json, "params"), "id") == id)
            return true;
    }
    return false;
}

int Server::run(const ReadBytes& read) {
    std::shared_ptr<Inbox> inbox = inbox_;
    size_t maxBytes = options_.maxMessageBytes;
    std::thread reader([inbox, read, maxBytes] {
        FrameReader frames(read, maxBytes);
        auto push = [&](Item item) {
            std::lock_guard<std::mutex> lock(inbox->mutex);
            if (item.kind == Item::Kind::Message && changesDocuments(item.json)) ++inbox->pendingEdits;
            inbox->items.push_back(std::move(item));
            inbox->ready.notify_one();
        };
        for (;;) {
            Frame frame;
            try {
                frame = frames.next();
            } catch (...) {  // out of memory: the input cannot be read on
                break;
            }
            if (frame.kind == Frame::Kind::End) break;
            if (frame.kind == Frame::Kind::Problem) {
                push(Item{Item::Kind::Reply,
                          errorReply(frame.id, jsonrpc::kParseError, "Parse error: " + frame.problem)});
                continue;
            }
            Json reply;
            std::optional<Json> message = jsonrpc::parseMessage(frame.body, kMaxMessageDepth, reply);
            if (message) push(Item{Item::Kind::Message, std::move(*message)});
            else push(Item{Item::Kind::Reply, std::move(reply)});
        }
        inbox->readerDone = true;
        push(Item{Item::Kind::End, nullptr});
    });
    try {
        for (;;) {
            std::optional<Item> item = take(false);
            if (!item) {
                // Nothing is waiting: check what was edited, then wait for the next message.
                analysePending();
                item = take(true);
            }
            if (item->kind == Item::Kind::End) {
                exitCode_ = state_ == State::ShutDown ? 0 : 1;
                break;
            }
            if (item->kind == Item::Kind::Reply) send(item->json);
            else handle(item->json);
            if (exitCode_ || outputGone_) break;
        }
    } catch (...) {  // handle() answers every failure of a message; this is out of memory or worse
        exitCode_ = 1;
    }
    // After `exit` the reading thread may still wait for input that never comes: it owns the
    // inbox it shares, so it can be left to the end of the process.
    if (inbox_->readerDone) reader.join();
    else reader.detach();
    return exitCode_.value_or(1);
}

void Server::handle(const Json& message) {
    if (message.is_array()) {
        send(errorReply(nullptr, jsonrpc::kInvalidRequest,
                        "Invalid Request: batches are not supported; send one message per frame"));
        return;
    }
    if (!message.is_object()) {
        send(errorReply(nullptr, jsonrpc::kInvalidRequest, "Invalid Request: a message must be a JSON object"));
        return;
    }
    bool hasId = message.contains("id");
    Json id = hasId ? message["id"] : Json(nullptr);
    if (hasId && !id.is_string() && !id.is_number_integer() && !id.is_null()) {
        send(errorReply(nullptr, jsonrpc::kInvalidRequest, "Invalid Request: id must be a string or an integer"));
        return;
    }
    if (!message.contains("method")) {
        if (message.contains("result") || message.contains("error")) return;  // a reply to nothing the server asked
        send(errorReply(id, jsonrpc::kInvalidRequest, "Invalid Request: no method"));
        return;
    }
    if (hasId && id.is_null()) {
        send(errorReply(nullptr, jsonrpc::kInvalidRequest,
                        "Invalid Request: id must not be null; a request has a string or an integer id, a "
                        "notification none"));
        return;
    }
    const Json& methodJson = message["method"];
    if (!methodJson.is_string()) {
        if (hasId) send(errorReply(id, jsonrpc::kInvalidRequest, "Invalid Request: method must be a string"));
        return;
    }
    if (message.value("jsonrpc", Json(nullptr)) != "2.0") {
        if (hasId) send(errorReply(id, jsonrpc::kInvalidRequest, "Invalid Request: jsonrpc must be \"2.0\""));
        return;
    }
    const std::string& method = methodJson.get_ref<const std::string&>();
    Json params = message.contains("params") ? message["params"] : Json::object();
    if (params.is_null()) params = Json::object();
    if (!hasId) {
        try {
            if (!params.is_object() && !params.is_array()) throw BadParams{"params must be an object"};
            notification(method, params);
        } catch (const BadParams& bad) {
            log(kLogError, fmt::format("{}: invalid params: {}", firstCodePoints(method, 100), bad.message));
        } catch (...) {
            log(kLogError, fmt::format("{}: internal error; the notification was ignored", firstCodePoints(method, 100)));
        }
        return;
    }
    if (cancelledWhileQueued(id)) {
        send(errorReply(id, kRequestCancelled, "Request cancelled"));
        return;
    }
    try {
        if (!params.is_object()) throw BadParams{"params must be an object"};
        send(resultReply(id, request(method, params)));
    } catch (const BadParams& bad) {
        send(errorReply(id, jsonrpc::kInvalidParams, "Invalid params: " + bad.message));
    } catch (const Refused& refused) {
        send(errorReply(id, refused.code, refused.message));
    } catch (...) {
        send(errorReply(id, jsonrpc::kInternalError, "Internal error: the request failed inside the server"));
    }
}

Json Server::request(const std::string& method, const Json& params) {
    auto refuse = [](int code, std::string text) { throw Refused{code, std::move(text)}; };
    if (state_ == State::ShutDown) refuse(jsonrpc::kInvalidRequest, "Invalid Request: the server is shutting down");
    if (method == "initialize") {
        if (state_ != State::Uninitialized) refuse(jsonrpc::kInvalidRequest, "Invalid Request: already initialized");
        return initialize(params);
    }
    if (state_ == State::Uninitialized)
        refuse(kServerNotInitialized, fmt::format("Server not initialized: send initialize before {}",
                                                  firstCodePoints(method, 100)));
    if (method == "shutdown") {
        state_ = State::ShutDown;
        return nullptr;
    }
    if (method == "textDocument/hover") return hover(queryOf(analysed(openDocument(params))), positionOf(member(params, "position")));
    if (method == "textDocument/definition")
        return definition(queryOf(analysed(openDocument(params))), positionOf(member(params, "position")));
    if (method == "textDocument/documentSymbol") return documentSymbols(queryOf(analysed(openDocument(params))));
    if (method == "textDocument/completion")
        return completion(queryOf(analysed(openDocument(params))), positionOf(member(params, "position")));
    if (method == "textDocument/codeLens") return codeLenses(queryOf(analysed(openDocument(params))));
    if (method == "textDocument/formatting") {
        Document& doc = analysed(openDocument(params));
        std::string error;
        std::optional<Json> edits = formatting(queryOf(doc), error);
        if (!edits) throw Refused{kRequestFailed, error};
        return *edits;
    }
    refuse(jsonrpc::kMethodNotFound, fmt::format("Method not found: {}", firstCodePoints(method, 100)));
    return nullptr;
}

void Server::notification(const std::string& method, const Json& params) {
    if (method == "exit") {
        exitCode_ = state_ == State::ShutDown ? 0 : 1;
        return;
    }
    // Before initialize, and after shutdown, notifications other than exit are dropped (LSP 3.17).
    if (state_ != State::Running) return;
    if (method == "textDocument/didOpen") didOpen(params);
    else if (method == "textDocument/didChange") didChange(params);
    else if (method == "textDocument/didClose") didClose(params);
    else if (method == "textDocument/didSave") {
        const std::string& uri = stringMember(member(params, "textDocument"), "uri", "didSave's textDocument");
        if (documentKindOf(uri) == DocumentKind::Host) markPrograms();
    } else if (method == "workspace/didChangeWatchedFiles") {
        markPrograms();  // a host interface or policy changed on disk
    }
    // initialized, $/cancelRequest (handled while queued), $/setTrace, configuration: nothing to do.
}

Json Server::initialize(const Json& params) {
    // UTF-16 unless the client offers what the server prefers: UTF-8 (its own text), then UTF-32.
    const Json& offered = member(member(member(params, "capabilities"), "general"), "positionEncodings");
    encoding_ = PositionEncoding::Utf16;
    if (offered.is_array()) {
        bool utf8 = false, utf32 = false;
        for (const Json& e : offered) {
            utf8 = utf8 || e == "utf-8";
            utf32 = utf32 || e == "utf-32";
        }
        encoding_ = utf8 ? PositionEncoding::Utf8 : utf32 ? PositionEncoding::Utf32 : PositionEncoding::Utf16;
    }
    state_ = State::Running;
    Json capabilities = {
        {"positionEncoding", encodingName(encoding_)},
        {"textDocumentSync", {{"openClose", true}, {"change", 2}, {"save", {{"includeText", false}}}}},
        {"hoverProvider", true},
        {"definitionProvider", true},
        {"documentSymbolProvider", true},
        {"completionProvider", {{"triggerCharacters", {"."}}, {"resolveProvider", false}}},
        {"codeLensProvider", {{"resolveProvider", false}}},
        {"documentFormattingProvider", true},
    };
    return {{"capabilities", std::move(capabilities)},
            {"serverInfo", {{"name", "remitc lsp"}, {"version", options_.version}}}};
}

Document& Server::openDocument(const Json& params) {
    const std::string& uri = stringMember(member(params, "textDocument"), "uri", "the request's textDocument");
    auto it = docs_.find(uri);
    if (it == docs_.end())
        throw BadParams{fmt::format("{} is not open; send textDocument/didOpen first", firstCodePoints(uri, 200))};
    return it->second;
}

void Server::didOpen(const Json& params) {
    const Json& item = member(params, "textDocument");
    const std::string& uri = stringMember(item, "uri", "didOpen's textDocument");
    const std::string& text = stringMember(item, "text", "didOpen's textDocument");
    Document& doc = docs_[uri];
    doc.uri = uri;
    doc.path = pathOfUri(uri);
    doc.kind = documentKindOf(doc.path ? *doc.path : uri);
    doc.version = member(item, "version").is_number_integer() ? member(item, "version").get<int64_t>() : 0;
    doc.text.assign(text);
    doc.dirty = true;
    doc.analysis.reset();
    if (doc.kind == DocumentKind::Host) markPrograms();
}

void Server::didChange(const Json& params) {
    const Json& id = member(params, "textDocument");
    const std::string& uri = stringMember(id, "uri", "didChange's textDocument");
    auto it = docs_.find(uri);
    if (it == docs_.end()) throw BadParams{fmt::format("{} is not open", firstCodePoints(uri, 200))};
    Document& doc = it->second;
    const Json& changes = member(params, "contentChanges");
    if (!changes.is_array()) throw BadParams{"didChange needs contentChanges as a list"};
    // All the changes or none: each is validated before any is applied, so a bad one never
    // leaves the text half edited (and a large text is not copied to make that so).
    struct Change {
        const std::string* text;
        std::optional<std::pair<Position, Position>> range;  // none: the whole text
    };
    std::vector<Change> valid;
    for (const Json& change : changes) {
        Change c{&stringMember(change, "text", "a content change"), std::nullopt};
        const Json& range = member(change, "range");
        if (!range.is_null()) c.range = std::make_pair(positionOf(member(range, "start")), positionOf(member(range, "end")));
        valid.push_back(c);
    }
    for (const Change& c : valid) {
        if (!c.range) {
            doc.text.assign(*c.text);
            continue;
        }
        size_t begin = doc.text.offsetOf(c.range->first, encoding_);
        size_t end = doc.text.offsetOf(c.range->second, encoding_);
        doc.text.replace(std::min(begin, end), std::max(begin, end), *c.text);
    }
    if (member(id, "version").is_number_integer()) doc.version = member(id, "version").get<int64_t>();
    doc.dirty = true;
    if (doc.kind == DocumentKind::Host) markPrograms();
}

void Server::didClose(const Json& params) {
    const std::string& uri = stringMember(member(params, "textDocument"), "uri", "didClose's textDocument");
    auto it = docs_.find(uri);
    if (it == docs_.end()) return;
    bool host = it->second.kind == DocumentKind::Host;
    docs_.erase(it);
    std::set<std::string> targets = {uri};
    if (auto c = contributions_.find(uri); c != contributions_.end()) {
        for (const auto& [target, list] : c->second) targets.insert(target);
        contributions_.erase(c);
    }
    for (const std::string& target : targets) publish(target);
    published_.erase(uri);
    if (host) markPrograms();  // they read it from the disk again
}

void Server::markPrograms() {
    for (auto& [uri, doc] : docs_)
        if (doc.kind == DocumentKind::Program) doc.dirty = true;
}

const std::string* Server::openText(const std::string& path) const {
    for (const auto& [uri, doc] : docs_)
        if (doc.path && *doc.path == path) return &doc.text.text();
    return nullptr;
}

std::string Server::uriOf(const std::string& file) const {
    for (const auto& [uri, doc] : docs_)
        if (doc.path && *doc.path == file) return uri;
    return file.empty() || file[0] != '/' ? file : uriOfPath(file);
}

bool Server::analyse(Document& doc, bool interruptible) {
    std::function<bool()> interrupted;
    if (interruptible) interrupted = [inbox = inbox_] { return inbox->pendingEdits.load() > 0; };
    std::unique_ptr<Analysis> analysis;
    try {
        analysis = lsp::analyse(doc.path ? *doc.path : doc.uri, doc.path, doc.text.text(),
                                [this](const std::string& path) { return openText(path); }, interrupted);
    } catch (...) {
        // Not a diagnostic the user can act on: say so once, and do not try this text again.
        doc.dirty = false;
        doc.analysis.reset();
        log(kLogError, fmt::format("internal error while checking {}; edit the file to try again",
                                   firstCodePoints(doc.uri, 200)));
        return true;
    }
    if (analysis->interrupted) return false;
    doc.analysis = std::move(analysis);
    doc.dirty = false;
    publishFor(doc);
    return true;
}

Document& Server::analysed(Document& doc) {
    if (doc.dirty || !doc.analysis) analyse(doc, false);
    if (!doc.analysis) throw Refused{kRequestFailed, "the document could not be checked; edit it to try again"};
    return doc;
}

void Server::analysePending() {
    for (auto& [uri, doc] : docs_)
        if (doc.dirty && !analyse(doc, true)) return;  // a newer edit is waiting: handle it first
}

Query Server::queryOf(const Document& doc) const {
    return Query{*doc.analysis, doc.text, encoding_, doc.uri, [this](const std::string& file) { return uriOf(file); }};
}

void Server::publishFor(const Document& doc) {
    std::map<std::string, Json> now = diagnosticsByUri(queryOf(doc));
    std::set<std::string> targets;
    for (const auto& [target, list] : now) targets.insert(target);
    for (const auto& [target, list] : contributions_[doc.uri]) targets.insert(target);
    contributions_[doc.uri] = std::move(now);
    // The document's own list goes out after every check, so a client sees each version checked.
    for (const std::string& target : targets) publish(target, target == doc.uri);
}

void Server::publish(const std::string& uri, bool always) {
    Json merged = Json::array();
    std::set<std::string> seen;
    for (const auto& [owner, targets] : contributions_) {
        auto it = targets.find(uri);
        if (it == targets.end()) continue;
        for (const Json& d : it->second)
            if (seen.insert(d.dump()).second) merged.push_back(d);
    }
    auto last = published_.find(uri);
    if (!always && last != published_.end() && last->second == merged) return;
    published_[uri] = merged;
    Json params = {{"uri", uri}};
    if (auto doc = docs_.find(uri); doc != docs_.end() && !doc->second.dirty) params["version"] = doc->second.version;
    params["diagnostics"] = std::move(merged);
    notify("textDocument/publishDiagnostics", std::move(params));
}

}  // namespace

int runServer(const ReadBytes& read, const WriteBytes& write, const ServerOptions& options) {
    Server server(write, options);
    return server.run(read);
}

}  // namespace remit::lsp
