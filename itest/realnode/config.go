package realnode

import (
	"bytes"
	"text/template"
)

// containerdConfig is a node's containerd configuration (format version 3,
// containerd 2.x). Root, state and sockets are the node's own; the CRI
// plugin uses runc with a runc root of its own, the node's CNI dirs (the
// standard paths, which inside the node's mount namespace are private), and
// the locally built pause image.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 3
root = "{{.Root}}"
state = "{{.State}}"

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    # Negative oom_score_adj is refused on this machine; without this runc
    # fails with "can't get final child's PID from pipe".
    restrict_oom_score_adj = true
    enable_selinux = false
    disable_apparmor = true
    # Pod netns files stay at the standard /run/netns (private to the
    # node's mount namespace), where an agent's hostPath volume finds them.
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{{.Runc}}"
          Root = "{{.RuncRoot}}"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/opt/cni/bin"]
      conf_dir = "/etc/cni/net.d"
      max_conf_num = 1

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{{.PauseImage}}"

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.internal.v1.opt']
    path = "{{.Opt}}"
`))

type containerdParams struct {
	Root, State, Socket, Runc, RuncRoot, PauseImage, Opt string
}

// kubeletConfig is a node's KubeletConfiguration. cgroup v1 is accepted
// (failCgroupV1: false) with the cgroupfs driver under a cgroup root of the
// node's own; the kubelet serves on the node IP; nothing evicts (the
// harness's disk and memory are what they are); the kubelet API allows
// anonymous access, reachable only inside the harness's namespaces.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{{.CgroupRoot}}
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
containerRuntimeEndpoint: unix://{{.Socket}}
address: {{.NodeIP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podLogsDir: /var/log/pods
volumePluginDir: {{.VolumePluginDir}}
staticPodPath: ""
failSwapOn: false
resolvConf: ""
clusterDomain: cluster.local
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
registerNode: true
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
localStorageCapacityIsolation: false
protectKernelDefaults: false
serverTLSBootstrap: false
rotateCertificates: false
`))

type kubeletParams struct {
	CgroupRoot, Socket, NodeIP, VolumePluginDir string
}

func render(t *template.Template, params any) ([]byte, error) {
	var b bytes.Buffer
	err := t.Execute(&b, params)
	return b.Bytes(), err
}
