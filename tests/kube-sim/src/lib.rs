//! kube-sim: an in-memory Kubernetes API server that speaks the real wire protocol on
//! loopback. Work in progress; see the kube-sim section of the README.
