// See pg.h.
#include "session/pg.h"

#include <fmt/format.h>
#include <poll.h>

#include <cerrno>
#include <cstdlib>

namespace remit::pg {

bool Result::ok() const {
    if (!r_) return false;
    ExecStatusType s = PQresultStatus(r_.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

std::string Result::text(int row, int col) const {
    if (isNull(row, col)) return "";
    return std::string(PQgetvalue(r_.get(), row, col), static_cast<size_t>(PQgetlength(r_.get(), row, col)));
}

std::optional<double> Result::number(int row, int col) const {
    if (isNull(row, col)) return std::nullopt;
    char* end = nullptr;
    const char* s = PQgetvalue(r_.get(), row, col);
    double v = std::strtod(s, &end);
    if (end == s) return std::nullopt;
    return v;
}

std::string Result::state() const {
    if (!r_) return "08000";
    const char* s = PQresultErrorField(r_.get(), PG_DIAG_SQLSTATE);
    return s ? s : "";
}

std::string Result::message() const {
    if (!r_) return "no result from the server";
    const char* m = PQresultErrorField(r_.get(), PG_DIAG_MESSAGE_PRIMARY);
    return m ? m : PQresultErrorMessage(r_.get());
}

namespace {

// libpq's messages end with a newline and may span lines; one line reads better in ours.
std::string oneLine(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    for (char& c : text)
        if (c == '\n') c = ' ';
    return text;
}

}  // namespace

std::unique_ptr<Connection> Connection::open(const std::string& url, std::string& error) {
    // Keywords before dbname are defaults the URL (expanded from dbname) may override.
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "remitvm", url.c_str(), nullptr};
    PGconn* c = PQconnectdbParams(keys, values, 1);
    if (!c) {
        error = "out of memory";
        return nullptr;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        error = oneLine(PQerrorMessage(c));
        PQfinish(c);
        return nullptr;
    }
    // Notices (such as "relation already exists, skipping") are not for the user.
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    return std::unique_ptr<Connection>(new Connection(c));
}

Connection::~Connection() {
    if (conn_) PQfinish(conn_);
}

Result Connection::exec(const std::string& sql, const std::vector<Param>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
    Result r(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
    if (!r.ok()) lastError_ = alive() ? oneLine(r.message()) : oneLine(PQerrorMessage(conn_));
    return r;
}

bool Connection::script(const std::string& sql) {
    Result r(PQexec(conn_, sql.c_str()));
    if (r.ok()) return true;
    lastError_ = alive() ? oneLine(r.message()) : oneLine(PQerrorMessage(conn_));
    return false;
}

bool Connection::waitForNotification(int timeoutMs) {
    auto drain = [&] {
        bool any = false;
        while (PGnotify* n = PQnotifies(conn_)) {
            any = true;
            PQfreemem(n);
        }
        return any;
    };
    if (!PQconsumeInput(conn_)) return false;
    if (drain()) return true;
    pollfd fd{PQsocket(conn_), POLLIN, 0};
    if (fd.fd < 0) return false;
    int rc = ::poll(&fd, 1, timeoutMs);
    if (rc <= 0) return false;
    if (!PQconsumeInput(conn_)) return false;
    return drain();
}

std::string displayUrl(const std::string& url, std::string& error) {
    if (!url.starts_with("postgresql://") && !url.starts_with("postgres://")) {
        error = "a store URL starts with postgresql:// (for a state directory, use --state-dir DIR)";
        return "";
    }
    char* message = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &message);
    if (!options) {
        error = message ? oneLine(message) : "libpq cannot read it";
        if (message) PQfreemem(message);
        return "";
    }
    std::string user, host, port, dbname;
    for (PQconninfoOption* o = options; o->keyword; ++o) {
        std::string key = o->keyword, value = o->val ? o->val : "";
        if (key == "user") user = value;
        if (key == "host") host = value;
        if (key == "port") port = value;
        if (key == "dbname") dbname = value;
    }
    PQconninfoFree(options);
    bool socketDir = host.starts_with("/");
    std::string shown = "postgresql://" + (user.empty() ? "" : user + "@") + (socketDir ? "" : host) +
                        (port.empty() ? "" : ":" + port) + "/" + dbname;
    if (socketDir) shown += "?host=" + host;
    return shown;
}

}  // namespace remit::pg
