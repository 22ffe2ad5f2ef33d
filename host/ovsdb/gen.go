package ovsdb

// Regenerate the models (libovsdb v0.7.0 modelgen, version from go.mod):
//
//	go build -o bin/modelgen github.com/ovn-org/libovsdb/cmd/modelgen
//	bin/modelgen -p vswitchd -o host/ovsdb/vswitchd host/ovsdb/vswitchd/vswitch.ovsschema
//
// vswitchd/vswitch.ovsschema is /usr/share/openvswitch/vswitch.ovsschema
// (OVS 3.1, schema 8.3.1) reduced to Open_vSwitch, Bridge, Port and
// Interface, with references to other tables turned into plain UUIDs.
