#!/usr/bin/env bash
# The Debian package, end to end (docs/deploy.md): build it with cargo-deb, install it with
# dpkg, check what it installed (user, private data directory, config, unit), run
# `systemd-analyze verify` on the unit, start the server with exactly the unit's ExecStart
# as the `nacelle` user (with the unit's umask and file limit), wait for readiness, log in
# as the generated administrator, publish and read a config, stop it with SIGTERM, purge
# the package and check nothing is left.
#
# Needs root (dpkg, setpriv), cargo-deb (`cargo install cargo-deb`), curl and python3, on
# a Debian-like machine without a `nacelle` package installed. Fails loudly at the first
# problem; purges what it installed on the way out either way.
#
#   scripts/package-check.sh                    # build the .deb and check it
#   PACKAGE_CHECK_DEB=path.deb scripts/package-check.sh   # check a .deb built before
#   PACKAGE_CHECK_PORT=18848 scripts/package-check.sh     # 8848 busy: NACELLE_PORT=…
set -euo pipefail

cd "$(dirname "$0")/.."
started=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }
fail() {
    printf '\nPACKAGE CHECK FAILED: %s\n' "$*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, setpriv)"
for tool in dpkg setpriv prlimit curl python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing"
done
if dpkg -s nacelle >/dev/null 2>&1; then
    fail "a nacelle package is installed already: this check installs and purges its own"
fi

unit=/usr/lib/systemd/system/nacelle.service
port=${PACKAGE_CHECK_PORT:-8848}
log=$(mktemp /tmp/package-check-log.XXXXXX)
chmod 644 "$log"
server_pid=
installed=

cleanup() {
    status=$?
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [ -n "$installed" ]; then
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl stop nacelle 2>/dev/null || true
        fi
        dpkg --purge nacelle >/dev/null 2>&1 || echo "warning: dpkg --purge nacelle failed" >&2
    fi
    if [ "$status" != 0 ]; then
        echo "--- server log ($log) ---" >&2
        tail -n 40 "$log" >&2 || true
        echo "PACKAGE CHECK FAILED (exit $status)" >&2
    fi
    rm -f "$log"
}
trap cleanup EXIT

if [ -n "${PACKAGE_CHECK_DEB:-}" ]; then
    deb=$PACKAGE_CHECK_DEB
else
    # PACKAGE_CHECK_PROFILE=dev packages the debug build the test suite already made (the
    # test command does so, to spare CI a release build); the default is a release package.
    profile=${PACKAGE_CHECK_PROFILE:-release}
    step "build: cargo deb -p nacelle --profile $profile"
    command -v cargo-deb >/dev/null || fail "cargo-deb is missing: cargo install cargo-deb"
    deb=$(cargo deb -p nacelle --profile "$profile" 2>&1 | tee /dev/stderr | tail -n 1)
fi
[ -f "$deb" ] || fail "no .deb at '$deb'"
echo "package: $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
dpkg-deb --contents "$deb"

step "install: dpkg -i"
installed=yes
dpkg -i "$deb"
dpkg -s nacelle | grep -q '^Status: install ok installed' || fail "not installed"

step "what the package installed"
getent passwd nacelle >/dev/null || fail "no nacelle user"
shell=$(getent passwd nacelle | cut -d: -f7)
[ "$shell" = /usr/sbin/nologin ] || fail "the nacelle user has a login shell: $shell"
expect_stat() { # path 'mode owner:group'
    got=$(stat -c '%a %U:%G' "$1") || fail "$1 is missing"
    [ "$got" = "$2" ] || fail "$1 is '$got', want '$2'"
    echo "ok: $1 $got"
}
expect_stat /var/lib/nacelle '700 nacelle:nacelle'
expect_stat /etc/nacelle '750 root:nacelle'
expect_stat /etc/nacelle/nacelle.toml '640 root:nacelle'
expect_stat /usr/bin/nacelle '755 root:root'
expect_stat "$unit" '644 root:root'
grep -qx '/etc/nacelle/nacelle.toml' /var/lib/dpkg/info/nacelle.conffiles ||
    fail "/etc/nacelle/nacelle.toml is not a conffile"
/usr/bin/nacelle --version

step "systemd-analyze verify $unit"
if command -v systemd-analyze >/dev/null; then
    # Warnings about the machine itself (no running systemd) are printed, not fatal;
    # anything about the unit is.
    out=$(systemd-analyze verify "$unit" 2>&1) || {
        echo "$out"
        fail "systemd-analyze verify refused the unit"
    }
    if echo "$out" | grep -i 'nacelle.service'; then
        fail "systemd-analyze verify complained about the unit"
    fi
    echo "${out:-(no output)}"
    echo "ok: systemd-analyze verify accepts the unit"
else
    fail "systemd-analyze is missing (apt-get install systemd)"
fi

# The unit's own command line and limits, read from the installed unit.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
limit_nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
umask_unit=$(sed -n 's/^UMask=//p' "$unit")
user=$(sed -n 's/^User=//p' "$unit")
[ -n "$exec_start" ] && [ -n "$limit_nofile" ] && [ -n "$umask_unit" ] && [ -n "$user" ] ||
    fail "the unit lacks ExecStart, LimitNOFILE, UMask or User"

if [ -d /run/systemd/system ]; then
    # systemd runs this machine: the package started the service itself.
    step "the service, started by systemd"
    systemctl is-enabled nacelle || fail "not enabled"
    systemctl is-active nacelle || fail "not active"
else
    step "start as the unit does: setpriv (user $user) $exec_start (umask $umask_unit, nofile $limit_nofile)"
    # setpriv, not runuser/su: no PAM session (pam_limits would lower the soft file limit),
    # as systemd starts a unit without PAMName=.
    echo "(systemd is not PID 1 here: the command runs under setpriv instead)"
    # systemd (PID 1) may raise the limit to the unit's; a process here only up to its
    # hard limit (a container without CAP_SYS_RESOURCE).
    nofile=$limit_nofile
    if ! prlimit --nofile="$nofile:$nofile" -- true 2>/dev/null; then
        nofile=$(ulimit -Hn)
        echo "NOTE: this machine cannot raise the open-file limit to the unit's" \
            "$limit_nofile (hard limit $nofile): starting with $nofile" >&2
    fi
    extra_env=()
    if [ "$port" != 8848 ]; then
        extra_env=(env "NACELLE_PORT=$port")
    fi
    # Word splitting of ExecStart is intended: it is a command line without quoting.
    # shellcheck disable=SC2086
    prlimit --nofile="$nofile:$nofile" -- \
        setpriv --reuid="$user" --regid="$user" --init-groups --inh-caps=-all -- \
        sh -c "umask $umask_unit; exec \"\$@\"" nacelle \
        "${extra_env[@]}" $exec_start >"$log" 2>&1 &
    server_pid=$!
fi

step "readiness: GET /nacos/v1/console/health/readiness"
base=http://127.0.0.1:$port
ready=
for _ in $(seq 1 150); do
    if curl -fsS "$base/nacos/v1/console/health/readiness" >/dev/null 2>&1; then
        ready=yes
        break
    fi
    if [ -n "$server_pid" ] && ! kill -0 "$server_pid" 2>/dev/null; then
        fail "the server exited before it was ready"
    fi
    sleep 0.2
done
[ -n "$ready" ] || fail "not ready after 30 s"
echo "ok: ready"
curl -fsS "$base/nacos/v1/console/health/liveness" && echo
if [ -n "$server_pid" ]; then
    srv=$(pgrep -u "$user" -x nacelle | head -n1)
    [ -n "$srv" ] || fail "no nacelle process of user $user"
    grep -q "^Max open files *$nofile " "/proc/$srv/limits" || fail "nofile limit not applied"
    echo "ok: running as $(ps -o user= -p "$srv"), $(grep '^Max open files' "/proc/$srv/limits")"
fi
if grep -q 'PRIVATE DATA OPEN' "$log"; then
    fail "the server warned about file permissions"
fi

step "the data is private"
expect_stat /var/lib/nacelle '700 nacelle:nacelle'
for f in nacelle.db nacelle.db-wal nacelle.db-shm auth-token-secret initial-admin-password; do
    expect_stat "/var/lib/nacelle/$f" '600 nacelle:nacelle'
done

step "log in as the generated administrator, publish, read"
password=$(head -n1 /var/lib/nacelle/initial-admin-password)
token=$(curl -fsS -X POST "$base/nacos/v1/auth/login" \
    --data-urlencode username=nacos --data-urlencode "password=$password" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["accessToken"])')
[ -n "$token" ] || fail "no token"
answer=$(curl -fsS -X POST "$base/nacos/v1/cs/configs" -H "accessToken: $token" \
    --data-urlencode dataId=package-check.properties --data-urlencode group=CHECK \
    --data-urlencode content=installed=yes)
[ "$answer" = true ] || fail "publish answered '$answer'"
content=$(curl -fsS -G "$base/nacos/v1/cs/configs" -H "accessToken: $token" \
    --data-urlencode dataId=package-check.properties --data-urlencode group=CHECK)
[ "$content" = installed=yes ] || fail "read back '$content'"
echo "ok: published and read back"

if [ -n "$server_pid" ]; then
    step "stop with SIGTERM (as systemctl stop does)"
    srv=$(pgrep -u "$user" -x nacelle | head -n1)
    kill -TERM "$srv"
    code=0
    wait "$server_pid" || code=$?
    server_pid=
    [ "$code" = 0 ] || fail "exit status $code after SIGTERM"
    grep -q stopped "$log" || fail "no 'stopped' in the log"
    echo "ok: stopped cleanly"
fi

step "purge: dpkg --purge nacelle"
if [ -d /run/systemd/system ]; then
    systemctl stop nacelle
fi
dpkg --purge nacelle
installed=
for gone in /usr/bin/nacelle /etc/nacelle /var/lib/nacelle "$unit"; do
    [ ! -e "$gone" ] || fail "$gone is left after the purge"
done
! getent passwd nacelle >/dev/null || fail "the nacelle user is left after the purge"
echo "ok: nothing left"

step "PACKAGE CHECK PASSED"
