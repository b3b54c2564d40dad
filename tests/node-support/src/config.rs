//! The node's files: certificates (openssl, through the control-plane crate),
//! kubeconfigs, and the configuration of containerd, the CNI network, the kubelet and
//! kube-proxy. Every path is under the node's dir; `docs/testing-real-node.md` says
//! why each setting is there.

use crate::host::{BRIDGE, NODE_IP, POD_SUBNET, SERVICE_SUBNET};
use control_plane::pki;
use std::path::Path;

/// The node's name.
pub const NODE_NAME: &str = "so-node";
/// The sandbox image containerd's CRI uses (built locally, never pulled).
pub const PAUSE_IMAGE: &str = "so-node.local/pause:1";

/// The client identities: (file name, user, group).
const CLIENTS: &[(&str, &str, &str)] = &[
    ("admin", "admin", "system:masters"),
    (
        "kcm",
        "system:kube-controller-manager",
        "system:kube-controller-manager",
    ),
    (
        "scheduler",
        "system:kube-scheduler",
        "system:kube-scheduler",
    ),
    ("kubelet", "system:node:so-node", "system:nodes"),
    ("kube-proxy", "system:kube-proxy", "system:node-proxier"),
    (
        "apiserver-kubelet",
        "kube-apiserver-kubelet-client",
        "system:masters",
    ),
];

/// Makes the CA, the API server's serving certificate (node IP, loopback and the
/// `kubernetes` Service's names and IP), the client certificates, the ServiceAccount
/// key pair, and one kubeconfig per client pointing at `server`.
pub(crate) fn pki(pki_dir: &Path, server: &str) -> Result<(), String> {
    std::fs::create_dir_all(pki_dir).map_err(|e| format!("{}: {e}", pki_dir.display()))?;
    // CA, an apiserver certificate for loopback, admin, and sa.key/sa.pub.
    pki::make(pki_dir)?;
    pki::server_cert(
        pki_dir,
        "apiserver",
        &[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        &["127.0.0.1", NODE_IP, "10.0.0.1"],
    )?;
    for (name, user, group) in CLIENTS {
        if *name != "admin" {
            pki::client_cert(pki_dir, name, user, group)?;
        }
        let path = pki_dir.join(format!("{name}.kubeconfig"));
        let text = kubeconfig(pki_dir, server, name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn kubeconfig(pki_dir: &Path, server: &str, name: &str) -> String {
    let d = pki_dir.display();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: so-node\n  cluster:\n    server: {server}\n    \
         certificate-authority: {d}/ca.crt\nusers:\n- name: {name}\n  user:\n    \
         client-certificate: {d}/{name}.crt\n    client-key: {d}/{name}.key\ncontexts:\n\
         - name: {name}\n  context:\n    cluster: so-node\n    user: {name}\ncurrent-context: {name}\n"
    )
}

/// containerd 1.6's config: its own root, state, socket and runc root; the CRI with
/// the local pause image, `restrict_oom_score_adj` (root here lacks
/// CAP_SYS_RESOURCE: lowering a score fails and runc with it), cgroupfs, no AppArmor,
/// and the CNI plugins and config of this node.
pub(crate) fn containerd(dir: &Path, cni_bin: &Path) -> String {
    let d = dir.display();
    let cni = cni_bin.display();
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
[grpc]
  address = "{d}/containerd/containerd.sock"
[ttrpc]
  address = "{d}/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d}/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni}"
    conf_dir = "{d}/cni/net.d"
"#
    )
}

/// The pod network: the bridge plugin on the node's bridge (its address is the
/// gateway), host-local addresses, and one route, to the Service range via the node.
/// No default route: a pod cannot reach beyond this machine.
pub(crate) fn cni(dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "so-node",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{d}/cni/ipam",
        "ranges": [[{{ "subnet": "{POD_SUBNET}", "gateway": "{NODE_IP}", "rangeStart": "10.244.0.10" }}]],
        "routes": [{{ "dst": "{SERVICE_SUBNET}" }}]
      }}
    }},
    {{ "type": "portmap", "capabilities": {{ "portMappings": true }} }}
  ]
}}
"#
    )
}

/// The kubelet's configuration. `port` and `healthz` are free ports.
///
/// Disk eviction only below 100 MiB free (it was 1 %): the machine's disk is shared
/// with other builds, and at 3.0 GB free of 252 GB (1 % is 2.5 GB) the kubelet
/// evicted every pod of a run, one after the other, mid-check.
///
/// `syncFrequency: 5s` (default 1m): the kubelet rewrites a Secret volume's files
/// when it next syncs the pod, which, with nothing else happening to the pod, is
/// every `syncFrequency` plus up to half of it (62 s seen with the default). The
/// token and certificate rotation checks replace a mounted Secret and wait for the
/// files: 5–7.5 s at most instead of 60–90 s.
pub(crate) fn kubelet(dir: &Path, port: u16, healthz: u16) -> String {
    let d = dir.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous: {{ enabled: false }}
  webhook: {{ enabled: true }}
  x509: {{ clientCAFile: {d}/pki/ca.crt }}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{d}/containerd/containerd.sock
podLogsDir: {d}/pod-logs
makeIPTablesUtilChains: false
protectKernelDefaults: false
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "100Mi"
  nodefs.inodesFree: "1%"
  imagefs.available: "100Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
staticPodPath: ""
syncFrequency: 5s
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
"#
    )
}

/// kube-proxy (iptables) for the Service range: node ports only on the node IP (so
/// `route_localnet` stays as it is) and the conntrack sysctls left alone.
pub(crate) fn kube_proxy(dir: &Path, healthz: u16, metrics: u16) -> String {
    let d = dir.display();
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {d}/pki/kube-proxy.kubeconfig
hostnameOverride: {NODE_NAME}
clusterCIDR: {POD_SUBNET}
nodePortAddresses: ["{NODE_IP}/32"]
healthzBindAddress: 127.0.0.1:{healthz}
metricsBindAddress: 127.0.0.1:{metrics}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 5s
  minSyncPeriod: 0s
"#
    )
}
