// Package deploy holds no code: the directory carries what an operator
// installs (deploy/README.md): the systemd unit cephdpdkd@.service, in
// prometheus/ and grafana/ the monitoring, and in container/ the image
// and the cephadm and Kubernetes manifests for fleets. Its Go test checks the
// unit with systemd-analyze, checks that it agrees with the daemon (the
// state directory, the commands it runs) and runs its ExecStartPre and
// ExecStopPost command lines with the real binary.
package deploy
