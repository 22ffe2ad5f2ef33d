// Command render-manifests writes switchyard.yml, the one-file install
// manifest, from the parts in manifests/ with every Switchyard image
// tagged -version (default: manifests/VERSION). `make manifests` runs it;
// a harness that built its images with another tag renders its own copy:
//
//	go run ./manifests/cmd/render-manifests -version 0.1.1-rc -o /tmp/switchyard.yml
package main

import (
	"flag"
	"fmt"
	"os"

	"switchyard.dev/switchyard/manifests"
)

func main() {
	version := flag.String("version", manifests.Version(), "image tag of every Switchyard image")
	out := flag.String("o", "-", "output file (- for stdout)")
	flag.Parse()
	data, err := manifests.Render(*version)
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.Write(data)
		} else {
			err = os.WriteFile(*out, data, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render-manifests:", err)
		os.Exit(1)
	}
}
