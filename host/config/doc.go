// Package config loads switchyard-agent's configuration: a YAML file,
// overridden by SWITCHYARD_* environment variables (SWITCHYARD_BRIDGE_NAME,
// SWITCHYARD_NODENAME, ...), overridden by flags (--node-name, --bridge, ...;
// see Flags). Load refuses a bad config listing every problem with the key
// that caused it. Where to start: Load and Config.
//
// Example:
//
//	nodeName: node-1
//	bridge: {name: br-int, datapathType: auto}     # system (kernel) where the OVS module
//	                                                # exists, else netdev (userspace)
//	bridge: {userspaceTSO: auto}                    # netdev only: OVS userspace-tso-enable
//	                                                # (auto: on from OVS 3.3, which tunnels it)
//	ovs:
//	  dbSocket: unix:/var/run/openvswitch/db.sock
//	  runDir: /var/run/openvswitch                  # holds br-int.mgmt
//	runDir: /var/run/switchyard                     # state.json: table layout, cookie prefixes
//	socketDir: /var/run/switchyard                  # agent.sock: introspection API
//	node: {podCIDRs: [10.244.1.0/24], nodeIPs: [192.168.0.11], mtu: 1450}
//	limits: {maxFlows: 200000, maxBatch: 20000, requestsPerSecond: 200, burst: 400}
//	plugins:                                        # started in this order
//	  - name: podnet
//	    path: /opt/switchyard/plugins/podnet
//	    config: {anything: "handed to the plugin as JSON, key case kept"}
//	  - name: template
//	    path: /opt/switchyard/plugins/template
//	    limits: {maxFlows: 1000}                    # per-plugin override
//	    config: {blockTCPPorts: [23]}
package config
