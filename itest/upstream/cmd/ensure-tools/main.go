// Command ensure-tools builds (or finds cached) every upstream tool the
// harness runs and prints the directories holding them, one a line: the
// control plane (kube-apiserver, etcd), the kube group (kubelet,
// kube-scheduler, kube-controller-manager, agnhost), containerd and the
// reference CNI plugins. `make tools` runs it so that the long first builds
// happen before, not inside, a test's timeout. With -bench it builds only
// what the benchmarks need beyond that (kube-proxy, the service
// benchmark's baseline); `make bench` runs it so, `make tools` never does.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

func main() {
	toolsDir, err := testenv.SourceDir("tools")
	if err != nil {
		log.Fatal(err)
	}
	bench := flag.Bool("bench", false, "build the benchmarks' extra tools (kube-proxy) instead")
	flag.Parse()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	steps := []func() (string, error){
		func() (string, error) { return upstream.EnsureGroup(toolsDir, upstream.Control, logf) },
		func() (string, error) { return upstream.EnsureGroup(toolsDir, upstream.Kube, logf) },
		func() (string, error) { return upstream.EnsureContainerd(logf) },
		func() (string, error) { return upstream.EnsureCNIPlugins(logf) },
	}
	if *bench {
		steps = []func() (string, error){
			func() (string, error) { return upstream.EnsureGroup(toolsDir, upstream.KubeProxy, logf) },
		}
	}
	for _, step := range steps {
		dir, err := step()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(dir)
	}
}
