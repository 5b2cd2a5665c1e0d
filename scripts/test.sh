#!/usr/bin/env bash
# The whole test suite on a fresh machine, with nothing running before it (README, "Run the
# whole test suite"; `.ci/run` runs exactly this):
#   1. installs what is missing from Debian (database servers, chromium and its driver,
#      nghttp2's client), the Python clients' virtualenvs and the browser test's npm
#      package;
#   2. starts throwaway MariaDB and PostgreSQL servers (scripts/test-databases.sh) and
#      stops them at the end, whatever happens;
#   3. checks, each one `CHECK PASS|FAIL <name>` line: the formatting (`cargo fmt --all --
#      --check`), the crate boundaries of ARCHITECTURE.md (`cargo tree`), that every path
#      and Rust name ARCHITECTURE.md mentions still exists (scripts/check-architecture.sh),
#      that vendor/h2 is the published h2 plus its documented patch, and that the
#      console's CodeMirror bundle is what its lockfile builds;
#   4. runs every Rust test (`cargo test --workspace --no-fail-fast`), then clippy on every
#      target with every feature, warnings denied (`CHECK … clippy`, after the build, whose
#      proc macros and build scripts it reuses), then the real Java clients and the Spring
#      Cloud Alibaba app (compat/java, Maven), the real Go client (compat/go) and the real
#      Node.js client (compat/node) against the binary that build made, then the deployment
#      files (docs/deploy.md: the Kubernetes manifests and the unit checked, the Debian
#      package built, installed, started as its unit and purged, the container recipe built
#      where a Docker daemon runs);
#   5. closes with one line counting every test and check of every runner: passed, failed,
#      skipped.
# Every stage and check runs even when an earlier one failed (one failure does not hide
# the state of the rest); the exit status is non-zero when any failed.
#
#   bash scripts/test.sh            # everything
#   SUITES="rust go" bash scripts/test.sh   # a subset of: rust java go node deploy
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SUITES=${SUITES:-rust java go node deploy}

# --- 1. What the suites need --------------------------------------------------------------
have_pg() { command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
missing=()
# The database servers the suites start for themselves (step 2).
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
have_pg || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
# Replicated databases (crates/nacelle/tests/replicated_db.rs): a Galera cluster (galera-4,
# its SST by rsync) and a PostgreSQL standby behind HAProxy.
[ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
# Staged rollouts' Prometheus guard (crates/nacelle/tests/rollouts.rs) against a real
# Prometheus server the test starts.
[ -x /usr/bin/prometheus ] || missing+=(prometheus)
# The console's browser test (crates/nacelle/tests/console_browser.rs) drives Debian's
# headless chromium with playwright-core from npm (Playwright's own browser download cannot
# work here).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# A CJK font, so the Chinese console pages (and their screenshots) render their text.
fc-list :lang=zh 2>/dev/null | grep -q . || missing+=(fonts-wqy-microhei)
# nghttp2's h2load and nghttp: an HTTP/2 stack independent of the server's
# (crates/nacelle-grpc/tests/nghttp2.rs).
command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
# Node.js only when absent (a nodesource nodejs brings its own npm; Debian's would conflict).
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
case " $SUITES " in *" java "*) command -v mvn >/dev/null 2>&1 || missing+=(maven default-jdk-headless) ;; esac
case " $SUITES " in *" go "*) command -v go >/dev/null 2>&1 || missing+=(golang-go) ;; esac
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${missing[*]} (install them as root, then run again)" >&2
    exit 1
  fi
  echo "installing from Debian: ${missing[*]}" >&2
  apt-get update -qq
  # The packages' own services are not wanted: the suites start their own servers.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The Python client tests need nacos-sdk-python in virtualenvs (from PyPI): 1.0.0 (HTTP v1)
# for python_client, 2.0.9 (gRPC) for python_grpc_client.
bash scripts/python-venv.sh >/dev/null
bash scripts/python-venv.sh "" 2.0.9 >/dev/null
# Nacos 3's operator SDK for Python (python_maintainer), in target/py-venv-<package>-<version>.
bash scripts/python-venv.sh "" 0.5.3 nacos-maintainer-sdk-python >/dev/null
(cd crates/nacelle-console/e2e && npm ci --no-audit --no-fund --loglevel=error)
case " $SUITES " in *" node "*) (cd compat/node && npm ci --no-audit --no-fund --loglevel=error) ;; esac
# The Debian package is built with cargo-deb (crates.io), once per machine.
case " $SUITES " in *" deploy "*) command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked --quiet ;; esac

# --- 2. Databases --------------------------------------------------------------------------
db_env=$(bash scripts/test-databases.sh start)
eval "$db_env"
log=$(mktemp)
cleanup() {
  bash scripts/test-databases.sh stop "${NACELLE_TEST_DB_DIR:-}" || true
  rm -f "$log"
}
trap cleanup EXIT

# --- 3. Formatting, crate boundaries (ARCHITECTURE.md), the map's names, vendor/h2, the console bundle
status=0
# One check: its output, then `CHECK PASS|FAIL <name>` (counted in the closing line); a
# failure is remembered in the exit status and the script goes on.
check() { # name, command…
  local name=$1; shift
  if "$@" </dev/null 2>&1 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ]; then
    echo "CHECK PASS $name" | tee -a "$log"
  else
    echo "CHECK FAIL $name" | tee -a "$log"; status=1
  fi
}
check fmt cargo fmt --all -- --check
# The crate boundaries ARCHITECTURE.md marks *enforced*: a crate's dependencies (`cargo
# tree -p CRATE -e EDGES`, the crate's own first line aside) hold no line matching the
# pattern. Keep this table and the document's statements in step.
deps_exclude() { # crate, edges, extended regex of forbidden `name v…` lines
  local tree found
  tree=$(cargo tree -p "$1" --prefix none -e "$2") || { echo "cargo tree -p $1 failed"; return 1; }
  found=$(tail -n +2 <<<"$tree" | sed 's/ (\*)$//' | grep -E "$3" | sort -u)
  [ -z "$found" ] && return 0
  echo "$1 must not depend on these (ARCHITECTURE.md, Code map):"; echo "$found"; return 1
}
server_crate='^nacelle(-core|-store|-service|-http|-grpc|-cluster|-metrics|-testkit)? v'
while read -r crate edges pattern; do
  check "boundary $crate" deps_exclude "$crate" "$edges" "$pattern"
done <<BOUNDARIES
nacelle-core normal ^(nacelle[a-z-]*|tokio|sqlx|rusqlite|axum|hyper|h2|tonic|prost|reqwest) v
nacelle-proto normal,build,dev ^nacelle(-store|-service|-http|-grpc|-cluster)? v
nacelle-api normal ^(nacelle[a-z-]*|tokio|tonic|prost|hyper|reqwest) v
nacelle-cipher normal ^nacelle[a-z-]* v
nacelle-metrics normal ^nacelle[a-z-]* v
nacelle-tls normal ^nacelle[a-z-]* v
nacelle-console normal .
nacelle-store normal ^nacelle(-service|-http|-grpc|-cluster|-testkit)? v
nacelle-service normal ^nacelle(-store|-http|-grpc|-cluster|-testkit|-proto)? v|^(axum|hyper|h2|sqlx|rusqlite|reqwest|tonic|prost) v
nacelle-http normal ^nacelle(-grpc|-store|-cluster|-testkit)? v
nacelle-grpc normal ^nacelle(-http|-store|-cluster|-testkit)? v
nacelle-cluster normal ^nacelle(-http|-grpc|-store|-testkit)? v
nacelle-client normal $server_crate
nacelle-cli normal $server_crate
BOUNDARIES
# The testkit is only ever a dev-dependency: no crate has it as a normal one.
dev_only() { # crate
  local users
  users=$(cargo tree -i "$1" --workspace --prefix none -e normal) || { echo "cargo tree -i $1 failed"; return 1; }
  users=$(tail -n +2 <<<"$users" | sed 's/ (\*)$//' | sort -u)
  [ -z "$users" ] && return 0
  echo "$1 must only be a dev-dependency, but these use it:"; echo "$users"; return 1
}
check "boundary nacelle-testkit" dev_only nacelle-testkit
# Every path and Rust name ARCHITECTURE.md puts in backticks still exists.
check architecture bash scripts/check-architecture.sh
# vendor/h2 is exactly the published h2 plus vendor/h2/nacelle-h2.patch (the crate fetched
# from crates.io and checked against the index's checksum).
check vendored-h2 bash scripts/check-vendored-h2.sh
# The console's committed CodeMirror bundle is exactly what its lockfile builds (npm ci +
# esbuild in crates/nacelle-console/editor-src).
check console-bundle bash scripts/check-console-bundle.sh

# --- 4. The suites -------------------------------------------------------------------------
# A fresh clone builds once: the incremental cache would only add gigabytes of disk.
export CARGO_INCREMENTAL=0
set +e
# The Rust suites; they also build target/debug/nacelle, which the other suites run.
case " $SUITES " in *" rust "*)
  cargo test --workspace --no-fail-fast 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
*)
  cargo build -p nacelle 2>&1 | tail -3 ;;
esac
# Clippy on every target and feature, warnings denied (the workspace's lints, `unwrap_used`
# among them). After the build: it reuses the build's proc macros and build scripts and
# type-checks the rest (2.5 min on 2 cores after a full build; seconds when nothing changed).
case " $SUITES " in *" rust "*)
  check clippy cargo clippy --workspace --all-targets --all-features -- -D warnings ;;
*)
  echo "CHECK SKIP clippy (SUITES has no rust)" | tee -a "$log" ;;
esac
export NACELLE_BIN="$ROOT/target/debug/nacelle"
# The code layout of optimised builds (crates/nacelle/link-order.txt) still names the
# functions this build defines (docs/benchmarks.md, "Idle RSS by code layout"); when it
# does not, `scripts/link-order.sh` regenerates it.
bash scripts/check-link-order.sh "$NACELLE_BIN" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
# The Java clients (nacos-client 2.x and 3.x) and the Spring Cloud Alibaba app: one Maven
# reactor, one JVM per module; dependencies come from Maven Central once per machine
# (~/.m2).
case " $SUITES " in *" java "*)
  mvn -B -ntp -f compat/java/pom.xml test 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
esac
# The Go client (nacos-sdk-go v2): one test binary; modules cached by Go once per machine.
case " $SUITES " in *" go "*)
  (cd compat/go && go test -count=1 -v ./... 2>&1) | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
esac
# The Node.js client (npm `nacos`, HTTP v1 long polling): node's test runner.
case " $SUITES " in *" node "*)
  (cd compat/node && npm test --silent 2>&1) | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
esac
# The deployment files (docs/deploy.md), each check one `DEPLOY PASS|FAIL|SKIP` line: the
# manifests against the Kubernetes schemas and the unit's syntax; as root, the Debian
# package end to end (from the debug build above, sparing a release build); the container
# recipe where a Docker daemon runs — otherwise said, loudly, and counted as skipped.
deploy_check() { # name, command…
  local name=$1; shift
  if "$@" 2>&1 | tee -a "$log"; [ "${PIPESTATUS[0]}" = 0 ]; then
    echo "DEPLOY PASS $name" | tee -a "$log"
  else
    echo "DEPLOY FAIL $name" | tee -a "$log"; status=1
  fi
}
case " $SUITES " in *" deploy "*)
  deploy_check manifests bash scripts/manifests-check.sh
  if [ "$(id -u)" = 0 ]; then
    PACKAGE_CHECK_PROFILE=dev deploy_check debian-package bash scripts/package-check.sh
  else
    echo "DEPLOY SKIP debian-package (scripts/package-check.sh needs root)" | tee -a "$log"
  fi
  if docker info >/dev/null 2>&1; then
    deploy_check container docker build -f packaging/Dockerfile --build-arg BINARY=prebuilt \
      --build-arg PREBUILT=target/debug/nacelle -t nacelle:ci .
  else
    echo "DEPLOY SKIP container (CONTAINER RECIPE NOT BUILT: no Docker daemon here)" | tee -a "$log"
  fi ;;
esac
set -e

# --- 5. One closing line -------------------------------------------------------------------
# libtest's `test result:` lines; Maven Surefire's per-module totals (the `Tests run:` lines
# without `Time elapsed`, which are per class); go test's top-level `--- PASS/FAIL/SKIP`;
# node's test runner's `# pass/fail/skipped N`; the deployment checks' `DEPLOY PASS/FAIL/SKIP`
# and the other checks' `CHECK PASS/FAIL/SKIP`.
# A Rust test whose backend the environment skips (NACELLE_TEST_MYSQL_URL=skip…) passes in
# libtest's count but writes `SKIPPED <test> (<reason>)`: counted as skipped, not passed.
awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i+1) ~ /^passed;?$/) p += $i;
         if ($(i+1) ~ /^failed;?$/) f += $i;
       }
     }
     /^SKIPPED / { s++; p-- }
     /Tests run: [0-9]+, Failures: [0-9]+, Errors: [0-9]+, Skipped: [0-9]+/ && !/Time elapsed/ {
       line = $0; sub(/.*Tests run: /, "", line); split(line, n, /[^0-9]+/);
       # n[1] run, n[2] failures, n[3] errors, n[4] skipped
       p += n[1] - n[2] - n[3] - n[4]; f += n[2] + n[3]; s += n[4];
     }
     /^--- PASS: / { p++ } /^--- FAIL: / { f++ } /^--- SKIP: / { s++ }
     /^# pass [0-9]+$/ { p += $3 } /^# fail [0-9]+$/ { f += $3 } /^# skipped [0-9]+$/ { s += $3 }
     /^DEPLOY PASS / { p++ } /^DEPLOY FAIL / { f++ } /^DEPLOY SKIP / { s++ }
     /^CHECK PASS / { p++ } /^CHECK FAIL / { f++ } /^CHECK SKIP / { s++ }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit "$status"
