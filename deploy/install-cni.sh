#!/bin/sh
# Installs Tartan's CNI plugins and configuration on the host (run by the
# DaemonSet's init container, on the host network so that the pods' MTU is
# measured on the node's own interfaces). The plugins reach the API server
# with the kubeconfig /etc/cni/net.d/tartan-kubeconfig, which felix writes
# and keeps fresh with tokens of the service account tartan-cni
# (docs/install.md). The conflist is left as 10-tartan.conflist.pending:
# felix renames it into place once that kubeconfig has a token, because
# the runtime calls the node's network ready (and pods come) as soon as a
# conflist appears.
set -eu
# The host's directories are mounted under /host and the image's files
# are at the root; cni/tests/install_cni_script.rs runs this script on
# directories of its own (TARTAN_HOST_ROOT, TARTAN_IMAGE_ROOT).
IMAGE=${TARTAN_IMAGE_ROOT:-}
BIN=${TARTAN_HOST_ROOT:-/host}/opt/cni/bin
NET=${TARTAN_HOST_ROOT:-/host}/etc/cni/net.d
# Each binary under a temporary name, then renamed over the old one: the
# runtime may start a plugin at any moment, and must find a whole file.
put() {
  install -m 0755 "$1" "$BIN/.$2.tartan-new"
  mv -f "$BIN/.$2.tartan-new" "$BIN/$2"
}
put "$IMAGE/usr/local/bin/tartan" tartan
put "$IMAGE/usr/local/bin/tartan-ipam" tartan-ipam
# The conflist chains portmap (hostPort) and the runtime runs loopback for
# every pod: shipped in the image for hosts that lack them, never replacing
# the host's own.
for p in portmap loopback; do
  if [ ! -x "$BIN/$p" ]; then
    put "$IMAGE/usr/lib/cni/$p" "$p"
    echo "installed the $p plugin (the host had none)"
  fi
done
# The conflist, rendered from the ConfigMap tartan-config (mounted at
# /etc/tartan/config) with the pods' MTU (docs/install.md), written
# atomically, for felix to install (--cni-conflist).
"$IMAGE/usr/local/bin/tartan-install-cni" --config-dir "$IMAGE/etc/tartan/config" \
  --out "$NET/10-tartan.conflist.pending" --nodename "${NODENAME}" \
  --datastore kubernetes --kubeconfig /etc/cni/net.d/tartan-kubeconfig
echo "tartan CNI plugins installed for node ${NODENAME}; felix installs the conflist"
