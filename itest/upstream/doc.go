// Package upstream builds and caches the upstream binaries the harness runs,
// in groups cached separately so adding one never rebuilds another:
//   - Control: kube-apiserver and etcd, from the pinned tools module in
//     ../tools;
//   - Kube: kubelet, kube-scheduler, kube-controller-manager and agnhost,
//     from its nested module ../tools/kube (same pins, version ldflags);
//   - KubeProxy: kube-proxy, from the same module with kube-proxy.mod
//     (the kube pins plus kube-proxy's own modules), for the service
//     benchmark's kube-proxy baseline only: `make tools-bench` or the
//     benchmark itself builds it, `make tools` does not;
//   - containerd, ctr and containerd-shim-runc-v2 (EnsureContainerd) and
//     the reference CNI plugins (EnsureCNIPlugins), from the module proxy
//     with their own go.mod.
//
// The control group takes about ten minutes on two cores the first time on
// a machine, so results are cached under ~/.cache/switchyard/tools, keyed by
// a hash of the group's module and build settings; later runs find the
// binaries in place. `make tools` builds every group the tests use.
package upstream
