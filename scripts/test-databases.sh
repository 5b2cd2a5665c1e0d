#!/usr/bin/env bash
# Throwaway MariaDB and PostgreSQL servers for the test suites: a data directory of their
# own in a temp dir, listening on 127.0.0.1 on ports below the kernel's ephemeral range
# (a port there is never taken by an outgoing connection), stopped and deleted by `stop`.
#
#   eval "$(bash scripts/test-databases.sh start)"   # exports the variables below
#   …run tests…
#   bash scripts/test-databases.sh stop "$NACELLE_TEST_DB_DIR"
#
# `start` prints, on stdout and nothing else:
#   export NACELLE_TEST_MYSQL_URL=mysql://root@127.0.0.1:PORT
#   export NACELLE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:PORT
#   export NACELLE_TEST_DB_DIR=/tmp/nacelle-test-databases.XXXXXX
# Every test creates a uniquely named database on these servers and drops it (testkit's
# `TestDb`). A variable already set in the environment (an external server, or `skip`) is
# kept, and that server is not started. The servers are tuned for tests, not durability
# (PostgreSQL without fsync, InnoDB flushing its log once a second): nothing here
# survives a crash of the machine, and nothing needs to.
#
# Needs `mariadb-install-db`/`mariadbd` (Debian: mariadb-server) and PostgreSQL's `initdb`,
# `pg_ctl` (Debian: postgresql); `.ci/run` installs both. As root, PostgreSQL runs as the
# `postgres` user (it refuses root) and MariaDB as root.
set -euo pipefail

log() { echo "test-databases: $*" >&2; }

# The ephemeral range starts at the first number of ip_local_port_range (32768 usually);
# these servers use 15000-19999, test servers of the suites other ranges below it.
pick_port() {
    local low=15000 span=5000 port i
    for i in $(seq 1 100); do
        port=$((low + RANDOM % span))
        # Free when nothing accepts on it (bash's /dev/tcp connect fails).
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    log "no free port in $low-$((low + span - 1))"
    return 1
}

pg_bin() {
    local name=$1 dir
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        return 0
    fi
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/$name" ]; then
            echo "$dir/$name"
            return 0
        fi
    done
    log "PostgreSQL's $name not found (Debian: apt-get install postgresql)"
    return 1
}

# Runs a command as the user PostgreSQL runs as: `postgres` when we are root.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start_mariadb() {
    local dir=$1 port tries
    command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || {
        log "mariadbd not found (Debian: apt-get install mariadb-server)"
        return 1
    }
    local mariadbd
    mariadbd=$(command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd)
    mkdir -p "$dir/mariadb"
    mariadb-install-db --no-defaults --datadir="$dir/mariadb/data" --user="$(id -un)" \
        --auth-root-authentication-method=normal --skip-test-db \
        >"$dir/mariadb/install.log" 2>&1 || {
        log "mariadb-install-db failed:"
        tail -20 "$dir/mariadb/install.log" >&2
        return 1
    }
    for tries in 1 2 3 4 5; do
        port=$(pick_port)
        "$mariadbd" --no-defaults --datadir="$dir/mariadb/data" --user="$(id -un)" \
            --bind-address=127.0.0.1 --port="$port" --socket="$dir/mariadb/mysqld.sock" \
            --pid-file="$dir/mariadb/mysqld.pid" --log-error="$dir/mariadb/error.log" \
            --skip-log-bin --max-connections=1000 --max-allowed-packet=64M \
            --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=256M \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
            >/dev/null 2>&1 &
        local pid=$! i
        for i in $(seq 1 300); do
            if mariadb --no-defaults -uroot --socket="$dir/mariadb/mysqld.sock" \
                -e 'SELECT 1' >/dev/null 2>&1; then
                # root over TCP from 127.0.0.1, as the suites connect (no password: the
                # server listens on loopback only and lives for one run).
                mariadb --no-defaults -uroot --socket="$dir/mariadb/mysqld.sock" -e \
                    "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
                     GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
                echo "$pid" >"$dir/mariadb/pid"
                echo "export NACELLE_TEST_MYSQL_URL=mysql://root@127.0.0.1:$port"
                log "MariaDB on 127.0.0.1:$port (pid $pid, data $dir/mariadb)"
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        # It exited (a port taken between the check and the bind) or never answered.
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        log "MariaDB did not start on port $port (try $tries):"
        tail -5 "$dir/mariadb/error.log" >&2 || true
    done
    return 1
}

start_postgres() {
    local dir=$1 port tries initdb pg_ctl
    initdb=$(pg_bin initdb)
    pg_ctl=$(pg_bin pg_ctl)
    mkdir -p "$dir/postgres"
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$dir/postgres"
    fi
    as_pg "$initdb" -D "$dir/postgres/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
        --no-sync >"$dir/postgres/initdb.log" 2>&1 || {
        log "initdb failed:"
        tail -20 "$dir/postgres/initdb.log" >&2
        return 1
    }
    for tries in 1 2 3 4 5; do
        port=$(pick_port)
        if as_pg "$pg_ctl" -D "$dir/postgres/data" -l "$dir/postgres/server.log" -w -t 60 \
            -o "-p $port -k $dir/postgres -c listen_addresses=127.0.0.1 -c fsync=off \
                -c synchronous_commit=off -c full_page_writes=off -c max_connections=500 \
                -c shared_buffers=128MB" start >/dev/null 2>&1; then
            echo "export NACELLE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port"
            log "PostgreSQL on 127.0.0.1:$port (data $dir/postgres)"
            return 0
        fi
        log "PostgreSQL did not start on port $port (try $tries):"
        tail -5 "$dir/postgres/server.log" >&2 || true
    done
    return 1
}

# `skip` or a URL in the environment: that backend is external (or skipped), leave it be.
wanted() {
    [ -z "${!1:-}" ]
}

cmd_start() {
    local dir
    dir=$(mktemp -d "${TMPDIR:-/tmp}/nacelle-test-databases.XXXXXX")
    # PostgreSQL's user must reach its directory inside.
    chmod 755 "$dir"
    echo "export NACELLE_TEST_DB_DIR=$dir"
    if wanted NACELLE_TEST_MYSQL_URL; then
        start_mariadb "$dir" || { cmd_stop "$dir"; return 1; }
    else
        log "NACELLE_TEST_MYSQL_URL is set: not starting MariaDB"
    fi
    if wanted NACELLE_TEST_POSTGRES_URL; then
        start_postgres "$dir" || { cmd_stop "$dir"; return 1; }
    else
        log "NACELLE_TEST_POSTGRES_URL is set: not starting PostgreSQL"
    fi
}

cmd_stop() {
    local dir=${1:-${NACELLE_TEST_DB_DIR:-}}
    if [ -z "$dir" ] || [ ! -d "$dir" ]; then
        log "stop: no directory given (NACELLE_TEST_DB_DIR)"
        return 0
    fi
    case "$(basename "$dir")" in
        nacelle-test-databases.*) ;;
        *) log "stop: $dir is not a directory this script made"; return 1 ;;
    esac
    if [ -f "$dir/postgres/data/postmaster.pid" ]; then
        as_pg "$(pg_bin pg_ctl)" -D "$dir/postgres/data" -m immediate -w stop >/dev/null 2>&1 ||
            log "could not stop PostgreSQL in $dir"
    fi
    if [ -f "$dir/mariadb/pid" ]; then
        local pid i
        pid=$(cat "$dir/mariadb/pid")
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
    log "stopped and removed $dir"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop "${2:-}" ;;
    *)
        echo "usage: $0 start | stop [DIR]" >&2
        exit 2
        ;;
esac
