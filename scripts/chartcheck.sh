#!/usr/bin/env bash
# scripts/chartcheck.sh: the Helm chart deploy/helm/antidote lints and renders
# what a cluster and antidote run expect.
#
#  1. helm (helm.sh/helm/v3, from the Go module proxy, HELM_VERSION) is
#     installed into .cache/bin once, and again only when the version changes;
#  2. `helm lint --strict` with the default values and with each ci/*.yaml;
#  3. `helm template` of each, and checks of the manifests: the probes ask
#     /healthz and /readyz on the port the config's admin address listens on,
#     the pod runs as 65532 with a read-only root, the ConfigMap holds the
#     config at the path the container reads, the ScaledObject (KEDA, on
#     antidote_healthy_lag capped at antidote_topic_partitions; its query
#     parsed by promtool where it is installed) and the ServiceMonitor exist
#     only when enabled,
#     the Deployment leaves its replicas to KEDA when KEDA scales it, every
#     key of the Secret that the pod reads exists;
#  4. each rendered config passes `antidote run --check` (built from the work
#     tree), with the Secret's values as its environment and files;
#  5. values the chart must refuse are refused (an admin block in config,
#     KEDA scaling to zero pods,
#     KEDA without a Prometheus, a ServiceMonitor that cannot read /metrics).
# Needs python3 with PyYAML (Debian: python3-yaml; installed with CI=true).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
chart=deploy/helm/antidote
helm="$PWD/.cache/bin/helm"
step() { printf '\n==> %s\n' "$*"; }

if ! go version -m "$helm" 2>/dev/null | awk -v v="$HELM_VERSION" '$1 == "mod" && $3 == v { ok = 1 } END { exit !ok }'; then
  step "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  GOBIN="$PWD/.cache/bin" GOWORK=off GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
# The first python3 with PyYAML: the one on PATH, else Debian's (where
# python3-yaml installs it).
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import yaml' 2>/dev/null; then py="$p"; break; fi
done
if [ -z "$py" ]; then
  if [ "${CI:-}" = true ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-yaml >/dev/null
    py=/usr/bin/python3
    "$py" -c 'import yaml' || { echo "python3-yaml installed, but $py cannot import yaml"; exit 1; }
  else
    echo "python3 with PyYAML is needed (apt-get install python3-yaml)"; exit 1
  fi
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/antidote" ./cmd/antidote

values=(default "$chart"/ci/*.yaml)
for v in "${values[@]}"; do
  name="$(basename "$v" .yaml)"
  args=()
  [ "$v" = default ] || args=(-f "$v")
  step "helm lint --strict $chart ${args[*]}"
  "$helm" lint --strict "$chart" "${args[@]}"
  step "helm template $chart ${args[*]}: checks"
  "$helm" template antidote "$chart" --namespace kafka-apps "${args[@]}" >"$tmp/$name.yaml"
  mkdir -p "$tmp/$name"
  # The checks print the config and the Secret's values (as env and files)
  # for step 4.
  vf="$v"; [ "$v" = default ] && vf="$chart/values.yaml"
  VALUES="$vf" "$py" - "$tmp/$name.yaml" "$tmp/$name" <<'EOF'
import os, sys, yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = sys.argv[2]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)
def one(kind):
    got = by_kind.get(kind, [])
    check(len(got) == 1, f"{len(got)} {kind}; want 1")
    return got[0] if got else {}

dep = one("Deployment")
cm = one("ConfigMap")
svc = one("Service")
pdb = one("PodDisruptionBudget")
pod = dep.get("spec", {}).get("template", {}).get("spec", {})
c = (pod.get("containers") or [{}])[0]
cfg = yaml.safe_load(cm.get("data", {}).get("antidote.yaml", "")) or {}

# The config: pipelines, and the admin API on every address of the pod.
check(cfg.get("pipelines"), "the ConfigMap's antidote.yaml has no pipelines")
admin = cfg.get("admin") or {}
port = int(str(admin.get("address", "")).rsplit(":", 1)[-1] or 0)
check(admin.get("allow-remote") is True, "admin.allow-remote is not true: the probes could not reach it")
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
check(ports.get("admin") == port and port > 0, f"container port admin {ports.get('admin')}; the config's admin listens on {port}")
check([p.get("targetPort") for p in svc.get("spec", {}).get("ports", [])] == ["admin"], "the Service does not target the admin port")

# The container reads the ConfigMap's file.
args = c.get("args", [])
check(args[:2] == ["run", "-c"], f"args {args}; want run -c FILE")
mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
cfg_path = args[2] if len(args) > 2 else ""
m = mounts.get(cfg_path, {})
vols = {v["name"]: v for v in pod.get("volumes", [])}
check(m.get("subPath") == "antidote.yaml" and vols.get(m.get("name"), {}).get("configMap", {}).get("name") == cm["metadata"]["name"],
      f"{cfg_path} is not the ConfigMap's antidote.yaml")

# Probes: the admin API's paths, on its port.
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    g = c.get(probe, {}).get("httpGet", {})
    check(g.get("path") == path and g.get("port") in ("admin", port), f"{probe}: {g}; want {path} on the admin port")

# Non-root, read-only root file system.
psc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532, f"pod securityContext {psc}")
check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False, f"container securityContext {sc}")
check("/tmp" in mounts, "no writable /tmp")

# KEDA: a ScaledObject on healthy lag when enabled, and then no fixed replicas.
values = yaml.safe_load(open(os.environ["VALUES"])) if os.environ.get("VALUES") else {}

# The PodDisruptionBudget covers the Deployment's pods; the container has the values' resources.
check(pdb.get("spec", {}).get("selector", {}).get("matchLabels") == dep.get("spec", {}).get("selector", {}).get("matchLabels"),
      "the PodDisruptionBudget selects other pods than the Deployment")
check(pdb.get("spec", {}).get("maxUnavailable") is not None, "the PodDisruptionBudget has no maxUnavailable")
res = c.get("resources") or {}
check(res.get("requests", {}).get("memory") and res.get("limits", {}).get("memory"), f"resources {res}; want memory requests and limits")
if values.get("resources"):
    check(res == values["resources"], f"resources {res}; want the values' {values['resources']}")
keda = (values.get("keda") or {}).get("enabled", False)
sos = by_kind.get("ScaledObject", [])
check(len(sos) == (1 if keda else 0), f"{len(sos)} ScaledObject with keda.enabled={keda}")
if sos:
    so = sos[0]["spec"]
    check(so["scaleTargetRef"]["name"] == dep["metadata"]["name"], "the ScaledObject scales another Deployment")
    check(so.get("maxReplicaCount", 0) >= so.get("minReplicaCount", 1) >= 0, "maxReplicaCount below minReplicaCount")
    t = so["triggers"][0]
    q = t["metadata"]["query"]
    check(t["type"] == "prometheus" and "antidote_healthy_lag" in q, f"trigger {t}; want prometheus on antidote_healthy_lag")
    if not (values.get("keda") or {}).get("query"):
        want_cap = f'scalar(max(antidote_topic_partitions{{namespace="kafka-apps",service="{dep["metadata"]["name"]}"}}) or vector({so["maxReplicaCount"]})) * {t["metadata"]["threshold"]})'
        check(q.startswith("clamp_max(sum(antidote_healthy_lag{") and q.endswith(want_cap), f"query {q!r}; want the healthy lag capped with {want_cap!r}")
    open(os.path.join(out, "query"), "w").write(q)
    check("replicas" not in dep["spec"], "the Deployment sets replicas while KEDA scales it")
else:
    check(dep["spec"].get("replicas", 0) >= 1, "no replicas")

# ServiceMonitor only when enabled, on the admin port's /metrics.
sm_on = (values.get("serviceMonitor") or {}).get("enabled", False)
sms = by_kind.get("ServiceMonitor", [])
check(len(sms) == (1 if sm_on else 0), f"{len(sms)} ServiceMonitor with serviceMonitor.enabled={sm_on}")
for s in sms:
    ep = s["spec"]["endpoints"][0]
    check(ep["port"] == "admin" and ep["path"] == "/metrics", f"ServiceMonitor endpoint {ep}")
    if not admin.get("open-reads"):
        check("authorization" in ep, "ServiceMonitor without the token while /metrics needs it")

# Every Secret key the pod reads exists in the Secret the chart makes.
secret = {}
for s in by_kind.get("Secret", []):
    secret = s.get("stringData", {})
env = {}
for e in c.get("env") or []:
    ref = e.get("valueFrom", {}).get("secretKeyRef")
    if ref and by_kind.get("Secret"):
        check(ref["key"] in secret, f"env {e['name']} reads key {ref['key']}, which the Secret lacks")
        env[e["name"]] = secret.get(ref["key"], "")
with open(os.path.join(out, "env"), "w") as f:
    for k, v in env.items():
        f.write(f"{k}={v}\n")
files = os.path.join(out, "secrets")
os.makedirs(files, exist_ok=True)
for k, v in secret.items():
    open(os.path.join(files, k), "w").write(v)
mount = next((m["mountPath"] for m in c.get("volumeMounts", []) if vols.get(m["name"], {}).get("secret")), "")
text = cm.get("data", {}).get("antidote.yaml", "")
if mount:
    text = text.replace(mount.rstrip("/") + "/", files + "/")
open(os.path.join(out, "antidote.yaml"), "w").write(text)

if problems:
    print("\n".join("FAIL: " + p for p in problems))
    sys.exit(1)
print(f"ok: {len(docs)} manifests: " + ", ".join(sorted(f"{k} {len(v)}" for k, v in by_kind.items())))
EOF
  if [ -f "$tmp/$name/query" ]; then
    if command -v promtool >/dev/null 2>&1; then
      step "promtool: the ScaledObject's query is PromQL ($name)"
      # A recording rule of the query: promtool parses its expression.
      q="$(cat "$tmp/$name/query")"
      printf 'groups:\n  - name: keda\n    rules:\n      - record: antidote:keda_query\n        expr: %s\n' "$("$py" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$q")" >"$tmp/$name/rules.yaml"
      promtool check rules "$tmp/$name/rules.yaml"
    elif [ "${CI:-}" = true ]; then
      echo "promtool missing with CI=true: the ScaledObject's query must be parsed (apt-get install prometheus)"; exit 1
    else
      echo "promtool missing: the ScaledObject's query is not parsed (apt-get install prometheus)"
    fi
  fi
  step "antidote run --check on the ConfigMap's config ($name)"
  (
    set -a
    # shellcheck disable=SC1091 # written above
    . "$tmp/$name/env"
    set +a
    "$tmp/antidote" run --check -c "$tmp/$name/antidote.yaml" >"$tmp/$name/check.out"
  ) || { cat "$tmp/$name/check.out"; exit 1; }
  head -1 "$tmp/$name/check.out"
done

step "values the chart refuses"
refuse() {
  local why="$1"; shift
  if "$helm" template antidote "$chart" "$@" >/dev/null 2>"$tmp/err"; then
    echo "FAIL: helm template $* rendered; want an error ($why)"; exit 1
  fi
  grep -q "$why" "$tmp/err" || { echo "FAIL: helm template $*: want an error naming '$why', got:"; cat "$tmp/err"; exit 1; }
  echo "refused: $* ($why)"
}
refuse "config.admin" --set config.admin.address=:1
refuse "keda.serverAddress" --set keda.enabled=true
refuse "secret.adminTokenKey" --set serviceMonitor.enabled=true
refuse "config.pipelines" --set config.pipelines=null
refuse "keda.minReplicaCount must be at least 1" --set keda.enabled=true --set keda.serverAddress=http://p:9090 --set keda.minReplicaCount=0
echo
echo "chart ok"
