// Package config loads switchyard-agent's configuration: a YAML file,
// overridden by SWITCHYARD_* environment variables (SWITCHYARD_BRIDGE_NAME,
// SWITCHYARD_NODENAME, ...), overridden by flags (--node-name, --bridge, ...;
// see Flags). The node name also comes from NODE_NAME (the DaemonSet's
// downward API). Load refuses a bad config listing every problem with the
// key that caused it. Where to start: Load and Config.
//
// Example:
//
//	nodeName: node-1
//	bridge: {name: br-int, datapathType: auto}     # system (kernel) where the OVS module
//	                                                # exists, else netdev (userspace)
//	bridge: {userspaceTSO: auto}                    # netdev only: OVS userspace-tso-enable
//	                                                # (auto: on from OVS 3.3, which tunnels it)
//	underlay: {bridge: br-phy, interface: eth0}     # netdev only, for tunnels: the node IP moves
//	                                                # from eth0 onto br-phy (host/underlay)
//	ovs:
//	  dbSocket: unix:/var/run/openvswitch/db.sock
//	  runDir: /var/run/openvswitch                  # holds br-int.mgmt
//	runDir: /var/run/switchyard                     # state.json: table layout, cookie prefixes
//	socketDir: /var/run/switchyard                  # agent.sock: introspection API
//	kubeconfig: /etc/switchyard/kubeconfig          # outside a pod; in a pod the in-cluster config
//	tokenFile: ""                                   # the agent's SA token for plugins (default: the client's)
//	controller: {address: switchyard-controller:10349, caFile: /etc/switchyard/controller-ca.crt}
//	health: {port: 10351}                           # /readyz and /livez over TCP (0: socket only)
//	readyWait: 10s                                  # how long an early CNI ADD waits for readiness
//	node: {mtu: 0}                                  # overrides only: podCIDRs, nodeIPs, mtu come from the Node and uplink
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
