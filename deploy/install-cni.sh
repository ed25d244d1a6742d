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
install -m 0755 /usr/local/bin/tartan /usr/local/bin/tartan-ipam "$BIN/"
# The conflist, rendered from the ConfigMap tartan-config (mounted at
# /etc/tartan/config) with the pods' MTU (docs/install.md), written
# atomically.
/usr/local/bin/tartan-install-cni --config-dir /etc/tartan/config \
  --out "$NET/10-tartan.conflist" --nodename "${NODENAME}" \
  --datastore kubernetes --kubeconfig /etc/cni/net.d/tartan-kubeconfig
echo "tartan CNI installed for node ${NODENAME}"
