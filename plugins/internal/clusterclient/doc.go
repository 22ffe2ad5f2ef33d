// Package clusterclient builds the Kubernetes client a plugin uses from
// what the host hands it in StartRequest (sdk.Cluster): the apiserver
// endpoint and the agent's token, asked afresh per request so rotation
// needs no restart. Plugins never read the agent's own credentials.
package clusterclient
