// Command build-images builds Switchyard's product images as docker-archive
// tarballs, with no Docker engine and no registry (`make images`):
//
//	bin/images/switchyard-agent-<version>.tar            agent, plugins, CNI binaries, yardctl
//	bin/images/switchyard-ovs-<version>.tar              ovsdb-server, ovs-vswitchd (Debian) + switchyard-ovs
//	bin/images/switchyard-controller-<version>.tar       controller, CA certificates, user 65532
//	bin/images/switchyard-plugin-template-<version>.tar  the template plugin + its copy entrypoint
//
// Binaries are compiled static (CGO_ENABLED=0, -trimpath, no build ID);
// Open vSwitch comes from Debian packages fetched with apt-get download into
// a cache (~/.cache/switchyard/debs) and trimmed to the binaries and the
// shared libraries their ELF headers name. Every timestamp is
// SOURCE_DATE_EPOCH (default 0), so two builds of one tree give the same
// digests. Load an archive with `ctr -n k8s.io images import FILE` or
// `docker load -i FILE`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run() error {
	home, _ := os.UserHomeDir()
	var o options
	flag.StringVar(&o.version, "version", "", "image tag (required), e.g. the output of git describe --always --dirty")
	flag.StringVar(&o.out, "out", "bin/images", "directory the archives are written to")
	flag.StringVar(&o.debCache, "deb-cache", filepath.Join(home, ".cache/switchyard/debs"), "cache of downloaded Debian packages")
	flag.StringVar(&o.repo, "repo", ".", "root of the Switchyard source tree")
	only := flag.String("only", "", "comma-separated subset of: "+strings.Join(imageNames, ","))
	flag.Parse()
	if o.version == "" {
		return fmt.Errorf("-version is required")
	}
	epoch := int64(0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		epoch = v
	}
	o.epoch = time.Unix(epoch, 0).UTC()
	o.images = imageNames
	if *only != "" {
		o.images = strings.Split(*only, ",")
		for _, n := range o.images {
			if !slices.Contains(imageNames, n) {
				return fmt.Errorf("-only: unknown image %q (have %s)", n, strings.Join(imageNames, ","))
			}
		}
	}
	results, err := build(o)
	if err != nil {
		return err
	}
	fmt.Printf("%-30s %-10s %-10s %s\n", "IMAGE", "LAYERS", "ARCHIVE", "DIGEST")
	for _, r := range results {
		fmt.Printf("%-30s %-10s %-10s %s\n", r.ref, mib(r.layerBytes), mib(r.archiveBytes), r.digest)
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }
