// Command etcd is the upstream etcd server, built from the module proxy at the
// version k8s.io/kubernetes pins, to back the harness's kube-apiserver.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
