// Package ovsrun_test runs the switchyard-ovs entrypoint (host/ovsrun) as
// the OVS DaemonSet does, with the real ovsdb-server and ovs-vswitchd of
// this machine, inside a node network namespace: first start (database
// created), readiness probe, restart (database kept, flow-restore-wait
// set), a second instance refused, and the uninstall command deleting
// br-int through OVSDB and removing the database, run directory, conflist
// and the CNI binaries it installed.
package ovsrun_test
