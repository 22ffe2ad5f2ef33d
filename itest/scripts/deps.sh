#!/usr/bin/env bash
# Installs the Debian packages Switchyard's build, tests and demo need.
# Idempotent: when every package is already installed it changes nothing.
set -euo pipefail

packages=(
  openvswitch-switch openvswitch-common # ovs-vswitchd, ovsdb-server; ovs-ofctl as a test witness
  libjemalloc2                          # ovs-vswitchd's allocator (switchyard-ovs --malloc, host/ovsrun)
  iproute2 iputils-ping                 # namespaces, veths, ping probes
  iperf3 ethtool                        # datapath throughput bench, pods' offload settings
  nftables                              # nft: kube-proxy's nftables mode (the service bench's baseline) execs it
  runc                                  # OCI runtime for the real-node harness (containerd-shim-runc-v2)
  protobuf-compiler                     # protoc for `make proto`
  kmod procps psmisc                    # lsmod/ps/killall used by clean-itest and checks
  git make gcc
)

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: must run as root to install Debian packages (try: sudo make deps)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's postinst may start the system OVS daemons. Tests run their own
# instances in private namespaces and must not meet a system ovs-vswitchd.
if command -v /usr/share/openvswitch/scripts/ovs-ctl >/dev/null 2>&1; then
  /usr/share/openvswitch/scripts/ovs-ctl stop >/dev/null 2>&1 || true
fi
