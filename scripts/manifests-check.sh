#!/usr/bin/env bash
# Checks the deployment files that need no root and no daemon (docs/deploy.md):
#   - the Kubernetes manifests against the Kubernetes API schemas, strictly (unknown
#     fields are errors), with PyPI's `kubernetes-validate` (offline: the schemas ship in
#     the package) in target/py-venv-kubernetes-validate-<version>;
#   - their hardening (scripts/manifests-hardening.py): no service-account token, secrets
#     as mounted files and never environment variables, the cluster port admitted from
#     members only by a NetworkPolicy;
#   - the systemd unit's syntax with `systemd-analyze verify` when the machine has it (a
#     missing /usr/bin/nacelle is the only complaint allowed: the package check,
#     scripts/package-check.sh, verifies the installed unit);
#   - the package's settings file parses and lists every key (that is a unit test:
#     `cargo test -p nacelle --lib the_packaged_settings_file`).
# Takes ~20 s the first time (the venv), ~2 s after.
#
#   scripts/manifests-check.sh [KUBERNETES_VERSION]     # default 1.32.0
set -euo pipefail
cd "$(dirname "$0")/.."
k8s_version=${1:-1.32.0}

python=$(bash scripts/python-venv.sh "" 1.37.0 kubernetes-validate | tail -n 1)
validate="$(dirname "$python")/kubernetes-validate"
"$validate" --strict -k "$k8s_version" packaging/k8s/*.yaml
"$python" scripts/manifests-hardening.py packaging/k8s/*.yaml

if command -v systemd-analyze >/dev/null; then
    out=$(systemd-analyze verify packaging/debian/nacelle.service 2>&1 || true)
    rest=$(grep -v 'Command /usr/bin/nacelle is not executable' <<<"$out" || true)
    if [ -n "$rest" ]; then
        echo "$out" >&2
        echo "systemd-analyze verify: the unit has problems (above)" >&2
        exit 1
    fi
    echo "systemd-analyze verify: packaging/debian/nacelle.service ok"
else
    echo "SKIPPED systemd-analyze verify (not installed)" >&2
fi
echo "manifests ok"
