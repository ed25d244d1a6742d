#!/bin/sh
# Installs Tartan's CNI plugins and configuration on the host (run by the
# DaemonSet's init container, on the host network so that the pods' MTU is
# measured on the node's own interfaces). The plugins reach the API server
# with the kubeconfig /etc/cni/net.d/tartan-kubeconfig, which felix writes
# and keeps fresh with tokens of the service account tartan-cni
# (docs/install.md); until felix has written it, pod creation on this
# node fails and the kubelet retries.
set -eu
BIN=/host/opt/cni/bin
NET=/host/etc/cni/net.d
# Each binary under a temporary name, then renamed over the old one: the
# runtime may start a plugin at any moment, and must find a whole file.
put() {
  install -m 0755 "$1" "$BIN/.$2.tartan-new"
  mv -f "$BIN/.$2.tartan-new" "$BIN/$2"
}
put /usr/local/bin/tartan tartan
put /usr/local/bin/tartan-ipam tartan-ipam
# The conflist chains portmap (hostPort) and the runtime runs loopback for
# every pod: shipped in the image for hosts that lack them, never replacing
# the host's own.
for p in portmap loopback; do
  if [ ! -x "$BIN/$p" ]; then
    put "/usr/lib/cni/$p" "$p"
    echo "installed the $p plugin (the host had none)"
  fi
done
# The conflist, rendered from the ConfigMap tartan-config (mounted at
# /etc/tartan/config) with the pods' MTU (docs/install.md), written
# atomically.
/usr/local/bin/tartan-install-cni --config-dir /etc/tartan/config \
  --out "$NET/10-tartan.conflist" --nodename "${NODENAME}" \
  --datastore kubernetes --kubeconfig /etc/cni/net.d/tartan-kubeconfig
echo "tartan CNI installed for node ${NODENAME}"
