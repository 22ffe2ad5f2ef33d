// Command ensure-tools builds (or finds cached) kube-apiserver and etcd and
// prints the directory holding them. `make tools` runs it so that the long
// first build happens before, not inside, a test's timeout.
package main

import (
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
	dir, err := upstream.Ensure(toolsDir, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dir)
}
