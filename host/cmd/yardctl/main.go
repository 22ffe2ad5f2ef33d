// Command yardctl inspects a Switchyard node through its agent's API
// socket: status, plugins, tables, flows, resources, and packet traces.
// See host/yardctl.
//
//	yardctl status
//	yardctl get flows --plugin podnet
//	yardctl trace --from default/a-1 --to 10.244.1.5 --port 80 -o json
package main

import (
	"errors"
	"fmt"
	"os"

	"switchyard.dev/switchyard/host/yardctl"
)

func main() {
	cmd := yardctl.NewCommand(os.Stdout)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "yardctl:", err)
		var ee *yardctl.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.Code)
		}
		os.Exit(yardctl.ExitFailure)
	}
}
