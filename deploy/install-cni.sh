#!/bin/sh
# Installs Tartan's CNI plugins and configuration on the host (run by the
# DaemonSet's init container, on the host network so that the pods' MTU is
# measured on the node's own interfaces). The plugin reaches the API server with this
# pod's service account token, written into a kubeconfig beside the
# configuration.
set -eu
BIN=/host/opt/cni/bin
NET=/host/etc/cni/net.d
SA=/var/run/secrets/kubernetes.io/serviceaccount
install -m 0755 /usr/local/bin/tartan /usr/local/bin/tartan-ipam "$BIN/"
umask 077
cat > "$NET/tartan-kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}
    certificate-authority-data: $(base64 -w0 < "$SA/ca.crt")
users:
- name: tartan
  user:
    token: $(cat "$SA/token")
contexts:
- name: tartan
  context: {cluster: local, user: tartan}
current-context: tartan
KUBECONFIG
umask 022
# The conflist, rendered from the ConfigMap tartan-config (mounted at
# /etc/tartan/config) with the pods' MTU (docs/install.md), written
# atomically.
/usr/local/bin/tartan-install-cni --config-dir /etc/tartan/config \
  --out "$NET/10-tartan.conflist" --nodename "${NODENAME}" \
  --datastore kubernetes --kubeconfig /etc/cni/net.d/tartan-kubeconfig
echo "tartan CNI installed for node ${NODENAME}"
