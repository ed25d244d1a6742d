#!/bin/sh
# Installs Tartan's CNI plugins and configuration on the host (run by the
# DaemonSet's init container). The plugin reaches the API server with this
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
cat > "$NET/10-tartan.conflist.tmp" <<CONFLIST
{
  "cniVersion": "1.0.0",
  "name": "k8s-pod-network",
  "plugins": [
    {
      "type": "tartan",
      "datastore": "kubernetes",
      "kubeconfig": "/etc/cni/net.d/tartan-kubeconfig",
      "nodename": "${NODENAME}",
      "ipam": {"type": "tartan-ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
  ]
}
CONFLIST
mv "$NET/10-tartan.conflist.tmp" "$NET/10-tartan.conflist"
echo "tartan CNI installed for node ${NODENAME}"
