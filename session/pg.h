// A thin, exception-free layer over libpq for the PostgreSQL store (session/pg_store.h): one
// connection, statements with text parameters, results read as text, transactions, and LISTEN/
// NOTIFY. No SQL is built from values: every value goes as a parameter. libpq is loaded with dlopen
// on the first connection or URL read (runtime/shared_library.h), not linked: linked, its twenty
// shared libraries cost every start of every tool about 10 M instructions (docs/performance.md).
#pragma once

#include <libpq-fe.h>  // types and constants only; the functions are called through pg.cpp's table

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace remit::pg {

class Result {
public:
    Result() = default;
    explicit Result(PGresult* r);
    // The statement succeeded (a command, or a query with rows).
    bool ok() const;
    int rows() const;
    bool isNull(int row, int col) const;
    std::string text(int row, int col) const;
    std::optional<double> number(int row, int col) const;
    // SQLSTATE of a failure ("40001", "42P01"), empty on success.
    std::string state() const;
    // The server's message for a failure.
    std::string message() const;

private:
    std::shared_ptr<PGresult> r_;
};

// A parameter: a text value, or SQL NULL.
using Param = std::optional<std::string>;

class Connection {
public:
    // Connects to `url` (a postgresql:// URL), with a 10 s connect timeout unless the URL sets
    // one. Null with `error` (libpq's reason, which never holds the password, or that libpq is not
    // installed).
    static std::unique_ptr<Connection> open(const std::string& url, std::string& error);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // One statement. On failure the result says why (message()); lastError() keeps it too.
    Result exec(const std::string& sql, const std::vector<Param>& params = {});
    // Several statements without parameters, in one round trip.
    bool script(const std::string& sql);
    // The connection is still there (a statement failing for another reason leaves it usable).
    bool alive() const;
    const std::string& lastError() const { return lastError_; }

    // BEGIN … COMMIT around `body`, which returns false to roll back. False with lastError() when
    // the transaction did not commit.
    template <class Body>
    bool transaction(Body&& body) {
        if (!exec("BEGIN").ok()) return false;
        if (!body()) {
            std::string why = lastError_;
            exec("ROLLBACK");
            lastError_ = why;
            return false;
        }
        return exec("COMMIT").ok();
    }

    // LISTEN/NOTIFY: waits up to `timeoutMs` for a notification on a channel this connection
    // listens to; true when one came (all pending ones are consumed). False on timeout or when the
    // connection is gone.
    bool waitForNotification(int timeoutMs);

private:
    explicit Connection(PGconn* c) : conn_(c) {}
    PGconn* conn_ = nullptr;
    std::string lastError_;
};

// The URL as messages show it: postgresql://user@host:port/dbname (?host=DIR for a socket
// directory), never the password. Empty with `error` when it is not a PostgreSQL URL libpq accepts.
std::string displayUrl(const std::string& url, std::string& error);

}  // namespace remit::pg
