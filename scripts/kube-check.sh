#!/usr/bin/env bash
# Checks deploy/kubernetes/ as CI does:
#  1. every manifest validated strictly against the Kubernetes API schemas
#     (kubernetes-validate --strict, from PyPI; cert-manager's kinds have no
#     schema there, so cert-manager.yaml is checked for its kinds and fields);
#  2. the Deployment and its PVC run under `podman kube play` with the image
#     scripts/container-check.sh builds (built here if missing) and the two
#     Secrets made from `certs` output exactly as the `kubectl create secret`
#     commands in docs/deploying.md make them; /healthz answers through the
#     published port and a node is admitted by a token made in the pod;
#  3. `podman kube down`, and every volume and secret removed.
# Podman 4.3 plays Pods, Deployments and PVCs: the Service, PDB,
# NetworkPolicy and ServiceAccount are validated, not run; the published
# port is added to the played copy as a hostPort on 127.0.0.1. The played
# copy's pod, claim and secrets carry this run's suffix (-kc<pid>): nothing
# of a user's (a container named janus-registration, as the docs name it)
# is touched. Python tools go in a venv of the script's own (target/kube-venv;
# a bare pip install is refused by PEP 668 on Debian 12).
#
#   scripts/kube-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT_NAME=kube-check
# shellcheck source=lib/container-engine.sh
source scripts/lib/container-engine.sh
manifest=deploy/kubernetes/janus-registration.yaml
certmanager=deploy/kubernetes/cert-manager.yaml

venv=$PWD/target/kube-venv
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
      say "FAILED: python3 -m venv does not work and python3-venv cannot be installed here"
      exit 1
    fi
    say "installing python3-venv (Debian)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  say "installing kubernetes-validate (PyPI) into $venv"
  "$venv/bin/pip" install -q kubernetes-validate >/dev/null 2>&1 ||
    { say "FAILED: kubernetes-validate could not be installed"; exit 1; }
fi
python=$venv/bin/python3
"$venv/bin/kubernetes-validate" --strict --quiet "$manifest"
say "kubernetes-validate --strict: $(grep -c '^kind:' "$manifest") resources in $manifest pass"
"$python" - "$certmanager" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {d["kind"]: d for d in docs}
assert set(kinds) == {"Issuer", "Certificate"}, kinds.keys()
assert all(d["apiVersion"] == "cert-manager.io/v1" for d in docs)
issuer, cert = kinds["Issuer"], kinds["Certificate"]
assert issuer["spec"]["ca"]["secretName"] == "janus-fleet-issuing"
spec = cert["spec"]
assert spec["issuerRef"] == {"name": issuer["metadata"]["name"], "kind": "Issuer"}
assert spec["secretName"] == "janus-registration-tls"
assert "controller.fleet.janus" in spec["dnsNames"]
assert spec["privateKey"]["algorithm"] == "ECDSA" and spec["privateKey"]["size"] == 256
known = {"secretName", "issuerRef", "commonName", "dnsNames", "duration", "renewBefore", "privateKey", "usages"}
assert set(spec) <= known, set(spec) - known
PY
say "cert-manager.yaml: an Issuer of kind CA and a Certificate for controller.fleet.janus into janus-registration-tls"

engine_pick
if [ "$engine" != podman ] && ! command -v podman >/dev/null 2>&1; then
  say "SKIPPED: running the manifests needs podman kube play; only validated"
  exit 0
fi
engine=podman
engine_configure_podman

version=$(crate_version)
image=janus-registration:$version
grep -q "image: $image\$" "$manifest" ||
  { say "FAILED: $manifest does not pin image $image"; exit 1; }
podman image exists "$image" || image_build "$image"

work=$(mktemp -d)
suffix=-kc$$
pod=janus-registration$suffix
claim=janus-registration-state$suffix
fleet_secret=janus-fleet$suffix
tls_secret=janus-registration-tls$suffix
admin_ca_secret=janus-registration-admin-ca$suffix
cleanup() {
  podman kube down "$work/play.yaml" >/dev/null 2>&1 || true
  podman volume rm -f "$claim" >/dev/null 2>&1 || true
  podman secret rm "$fleet_secret" "$tls_secret" "$admin_ca_secret" >/dev/null 2>&1 || true
  # Podman 4.3's kube play keeps each secret volume as a named volume.
  podman volume rm -f "$fleet_secret" "$tls_secret" "$admin_ca_secret" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --locked -q
bin=$PWD/target/debug/janus-registration
"$bin" certs fleet --out "$work/fleet" --name "Kube check" >/dev/null
"$bin" certs controller --fleet "$work/fleet" --out "$work/controller" --san 127.0.0.1 >/dev/null

# The Secrets as `kubectl create secret generic janus-fleet --from-file=...`
# and `kubectl create secret tls janus-registration-tls --cert --key` make
# them; podman's secret volumes read a Secret object stored as a podman secret.
# Podman up to 4.3 writes a secret volume's `data` values as stored, without
# the base64 decoding Kubernetes does: for it the values go in as text.
raw_secrets=no
case "$(podman version --format '{{.Client.Version}}')" in
  [0-3].* | 4.[0-3].*) raw_secrets=yes ;;
esac
secret_yaml() { # NAME TYPE KEY=FILE...
  RAW=$raw_secrets "$python" - "$@" <<'PY'
import base64, os, sys, yaml
name, kind, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
data = {}
for pair in pairs:
    key, path = pair.split("=", 1)
    value = open(path, "rb").read()
    data[key] = value.decode() if os.environ["RAW"] == "yes" else base64.b64encode(value).decode()
print(yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                      "type": kind, "data": data}))
PY
}
secret_yaml "$fleet_secret" Opaque "root.crt=$work/fleet/root.crt" "bundle.json=$work/fleet/bundle.json" |
  podman secret create "$fleet_secret" - >/dev/null
secret_yaml "$tls_secret" kubernetes.io/tls "tls.crt=$work/controller.crt" "tls.key=$work/controller.key" |
  podman secret create "$tls_secret" - >/dev/null
# The admin CA (its certificate only), and an orchestrator's credential
# that may make tokens and read nodes, kept outside the pod.
"$bin" certs admin-ca --out "$work/admin-ca" >/dev/null
"$bin" certs admin --ca "$work/admin-ca" --name kube-orchestrator --scope tokens --scope read \
  --out "$work/orchestrator" >/dev/null
secret_yaml "$admin_ca_secret" Opaque "admin-ca.crt=$work/admin-ca/admin-ca.crt" |
  podman secret create "$admin_ca_secret" - >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
admin_port=$(free_port)
"$python" - "$manifest" "$port" "$suffix" "$admin_port" >"$work/play.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
suffix = sys.argv[3]
played = []
for d in docs:
    if d["kind"] == "PersistentVolumeClaim":
        d["metadata"]["name"] += suffix
        played.append(d)
for d in docs:
    if d["kind"] == "Deployment":
        # What the Deployment's one replica runs: its pod template, as a Pod,
        # its claim and secrets named with this run's suffix.
        template = d["spec"]["template"]
        for c in template["spec"]["containers"]:
            for p in c["ports"]:
                if p["name"] in ("https", "admin"):
                    p["hostPort"] = int(sys.argv[2] if p["name"] == "https" else sys.argv[4])
                    p["hostIP"] = "127.0.0.1"
        for v in template["spec"]["volumes"]:
            if "persistentVolumeClaim" in v:
                v["persistentVolumeClaim"]["claimName"] += suffix
            if "secret" in v:
                v["secret"]["secretName"] += suffix
        played.append({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": d["metadata"]["name"] + suffix,
                                    "labels": template["metadata"]["labels"]},
                       "spec": template["spec"]})
print(yaml.safe_dump_all(played))
PY

podman kube play "$work/play.yaml" >"$work/play.log" 2>&1 ||
  { say "FAILED: podman kube play"; cat "$work/play.log"; exit 1; }
# The pod's one container is named <pod>-<container>; no match is a failure said, not a silent exit.
container=$(podman ps -a --format '{{.Names}}' | grep -x -- "$pod-registration" || true)
[ -n "$container" ] || { say "FAILED: no container $pod-registration after podman kube play"; cat "$work/play.log"; exit 1; }
deadline=$((SECONDS + 90))
until "$bin" healthcheck --addr "127.0.0.1:$port" >/dev/null 2>&1; do
  if [ $SECONDS -ge $deadline ]; then
    say "FAILED: /healthz never answered 200 through the published port"
    podman logs "$container" 2>&1 | tail -20
    exit 1
  fi
  sleep 1
done
run_as=$(podman inspect "$container" --format '{{.Config.User}} read-only-root={{.HostConfig.ReadonlyRootfs}} caps-dropped={{len .HostConfig.CapDrop}}')
say "podman kube play: $container healthy, /healthz 200 through 127.0.0.1:$port (user $run_as)"

# The token through the admin API, as an orchestrator without pods/exec makes it.
token=$("$bin" tokens add --description "kube check" --label vm=kube-node \
  --server "https://127.0.0.1:$admin_port" --server-ca "$work/fleet/root.crt" \
  --client-cert "$work/orchestrator.crt" --client-key "$work/orchestrator.key" |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["token"])') ||
  { say "FAILED: no token through the admin API"; podman logs "$container" 2>&1 | tail -20; exit 1; }
"$python" - "$work/fleet/root.crt" "127.0.0.1:$port" "$token" >"$work/user-data.json" <<'PY'
import json, sys
root = open(sys.argv[1]).read()
print(json.dumps({"controller_address": sys.argv[2], "controller_ca_cert": root,
                  "controller_fleet_root_cert": root, "registration_token": sys.argv[3],
                  "network": {"hostname": "kube-node"}}))
PY
set +e
"$bin" agent --dir "$work/node" --user-data "$work/user-data.json" --once >"$work/node.console" 2>&1
code=$?
set -e
[ "$code" = 0 ] || { say "FAILED: the token did not admit the node (agent exit $code)"; cat "$work/node.console"; exit 1; }
listed=$("$bin" nodes list --label vm=kube-node \
  --server "https://127.0.0.1:$admin_port" --server-ca "$work/fleet/root.crt" \
  --client-cert "$work/orchestrator.crt" --client-key "$work/orchestrator.key")
case $listed in
  *'"state":"admitted"'*) ;;
  *) say "FAILED: the admin API does not list the node as admitted: $listed"; exit 1 ;;
esac
say "a node admitted by a token made through the admin API (no exec), and listed by its label through it"

podman kube down "$work/play.yaml" >/dev/null 2>&1
podman volume rm -f "$claim" >/dev/null
podman secret rm "$fleet_secret" "$tls_secret" "$admin_ca_secret" >/dev/null
podman volume rm -f "$fleet_secret" "$tls_secret" "$admin_ca_secret" >/dev/null 2>&1 || true
left=$(podman ps -a --format '{{.Names}}' | grep -c -- "$suffix" || true)
[ "$left" = 0 ] || { say "FAILED: $left containers left after podman kube down"; exit 1; }
left=$(podman volume ls -q | grep -c -- "$suffix" || true)
[ "$left" = 0 ] || { say "FAILED: $left volumes left after podman kube down"; exit 1; }
say "OK (validated; played, healthy, a node admitted by a token made through the admin API; podman kube down, volume and secrets removed)"
