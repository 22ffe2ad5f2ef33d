// Package selfsign gives the controller a serving certificate without an
// operator-made Secret: it keeps a private CA and a serving certificate in a
// Secret it creates on first start, and publishes the CA alone in a
// ConfigMap that agents may read. Restarts and moves of the controller pod
// reuse the same CA, so agents keep trusting it; a serving certificate
// close to expiry is re-issued from that CA.
//
// Only the controller reads the Secret (the CA key stays there); agents get
// the CA certificate from the ConfigMap through the apiserver, so neither a
// Secret mount nor cluster DNS is needed on the nodes (see
// controller/client's Service discovery).
package selfsign
