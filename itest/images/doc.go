// Package images_test builds the product images twice with
// manifests/cmd/build-images (as `make images` does), reads them back with
// go-containerregistry, and checks what an operator relies on: identical
// digests for identical trees, the expected files, entrypoints and users,
// and that the binaries run from the extracted root filesystems, chrooted,
// with only what the image holds: Open vSwitch's daemons with the image's
// own shared libraries, switchyard-ovs bringing OVS up from the image, the
// static Go binaries, the controller as user 65532, and the template
// image's copy entrypoint. It needs root (chroot) and the Debian mirror
// (apt-get download, cached in ~/.cache/switchyard/debs).
package images_test
