// Package upstream builds and caches the upstream binaries the harness runs,
// in groups cached separately so adding one never rebuilds another:
//   - Control: kube-apiserver and etcd, from the pinned tools module in
//     ../tools;
//   - Kube: kubelet, kube-scheduler, kube-controller-manager and agnhost,
//     from its nested module ../tools/kube (same pins, version ldflags);
//   - containerd, ctr and containerd-shim-runc-v2 (EnsureContainerd) and
//     the reference CNI plugins (EnsureCNIPlugins), from the module proxy
//     with their own go.mod.
//
// The control group takes about ten minutes on two cores the first time on
// a machine, so results are cached under ~/.cache/switchyard/tools, keyed by
// a hash of the group's module and build settings; later runs find the
// binaries in place. `make tools` builds every group.
package upstream
