"""The hardening rules of Nacelle's Kubernetes manifests (packaging/k8s/*.yaml), checked by
scripts/manifests-check.sh after the schema check:

- every pod template sets `automountServiceAccountToken: false` (Nacelle never calls the
  Kubernetes API, so a stolen pod holds no token);
- no container takes a value from a Secret through an environment variable
  (`valueFrom.secretKeyRef`, `envFrom.secretRef`): secrets are mounted files, named by the
  `NACELLE_*_FILE` settings, and a mounted Secret is not readable by others (mode 0440 or
  stricter);
- a workload exposing the cluster gRPC port (9849, `cluster-grpc`) is covered by a
  NetworkPolicy whose every rule admitting that port admits only the workload's own pods
  (a podSelector matching its labels, no namespace or IP block), and no rule admits all
  ports.

Usage: python3 scripts/manifests-hardening.py FILE...   (needs PyYAML); exit 1 listing
each violation.
"""
import sys

import yaml

CLUSTER_PORT = 9849
CLUSTER_PORT_NAME = "cluster-grpc"


def workloads(docs):
    for d in docs:
        if d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            yield d


def matches(selector, labels):
    want = (selector or {}).get("matchLabels") or {}
    if (selector or {}).get("matchExpressions"):
        return False
    return bool(want) and all(labels.get(k) == v for k, v in want.items())


def admits_cluster_port(rule):
    ports = rule.get("ports")
    if not ports:
        return True  # a rule without ports admits every port
    return any(p.get("port") in (CLUSTER_PORT, CLUSTER_PORT_NAME) for p in ports)


def check(path, docs, problems):
    policies = [d for d in docs if d.get("kind") == "NetworkPolicy"]
    for w in workloads(docs):
        name = f"{path}: {w['kind']}/{w['metadata']['name']}"
        pod = w["spec"]["template"]
        spec = pod["spec"]
        labels = pod["metadata"].get("labels") or {}
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: automountServiceAccountToken is not false")
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            for e in c.get("env") or []:
                if (e.get("valueFrom") or {}).get("secretKeyRef"):
                    problems.append(
                        f"{name}: env {e['name']} takes a Secret's value; mount it as a "
                        f"file and name the file (NACELLE_*_FILE)")
            for e in c.get("envFrom") or []:
                if e.get("secretRef"):
                    problems.append(f"{name}: envFrom takes a whole Secret as variables")
        for v in spec.get("volumes") or []:
            secret = v.get("secret")
            if secret is not None:
                mode = secret.get("defaultMode", 0o644)
                if mode & 0o007:
                    problems.append(
                        f"{name}: Secret volume {v['name']} is readable by others "
                        f"(defaultMode {mode:o})")
        cluster_port = any(
            p.get("containerPort") == CLUSTER_PORT or p.get("name") == CLUSTER_PORT_NAME
            for c in spec.get("containers", []) for p in c.get("ports") or [])
        if not cluster_port:
            continue
        covering = [p for p in policies
                    if matches(p["spec"].get("podSelector"), labels)
                    and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])]
        if not covering:
            problems.append(f"{name}: exposes port {CLUSTER_PORT} but no NetworkPolicy "
                            f"selects its pods")
        for p in covering:
            pname = f"{path}: NetworkPolicy/{p['metadata']['name']}"
            for rule in p["spec"].get("ingress") or []:
                if not admits_cluster_port(rule):
                    continue
                if not rule.get("ports"):
                    problems.append(f"{pname}: a rule admits every port")
                    continue
                sources = rule.get("from")
                if not sources:
                    problems.append(f"{pname}: port {CLUSTER_PORT} admitted from anywhere")
                    continue
                for s in sources:
                    if set(s) != {"podSelector"} or not matches(s["podSelector"], labels):
                        problems.append(
                            f"{pname}: port {CLUSTER_PORT} admitted from {s}, not only "
                            f"from the members' pods")


def main(paths):
    problems = []
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        check(path, docs, problems)
    for p in problems:
        print(f"manifests-hardening: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"manifests-hardening: {len(paths)} files ok (no token, secrets as files, "
          f"cluster port from members only)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
