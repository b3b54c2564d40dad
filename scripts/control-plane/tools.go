//go:build tools

// Package tools pins the commands this module builds, so `go mod tidy` keeps them:
// the control plane (scripts/install-control-plane.sh) and the node's components
// (scripts/install-node.sh).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
