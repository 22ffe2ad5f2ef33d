// Command kube-apiserver is the upstream Kubernetes API server, built from the
// module proxy at the version pinned in this module's go.mod, so the integration
// harness runs the same server a real cluster does.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
